"""The gamma distribution with shape ``a`` (as ``jax.scipy.stats.gamma``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import gammaln, xlogy

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, loc, scale = promote_args_inexact(x, a, loc, scale)
    inside = x >= loc
    # Outside the support a stand-in point keeps log(y) and its gradient finite.
    y = jnp.where(inside, (x - loc) / scale, 1)
    log_probs = xlogy(a - 1, y) - y - gammaln(a) - jnp.log(scale)
    return jnp.where(inside, log_probs, -jnp.inf)


def pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, a, loc, scale))
