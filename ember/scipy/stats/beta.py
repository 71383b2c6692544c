"""The beta distribution on ``[loc, loc + scale]`` (as ``jax.scipy.stats.beta``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import betaln, xlog1py, xlogy

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = promote_args_inexact(x, a, b, loc, scale)
    y = (x - loc) / scale
    inside = (y >= 0) & (y <= 1)
    # Outside the support a stand-in point keeps the logs and their gradients finite.
    y = jnp.where(inside, y, 0.5)
    log_probs = xlogy(a - 1, y) + xlog1py(b - 1, -y) - betaln(a, b) - jnp.log(scale)
    return jnp.where(inside, log_probs, -jnp.inf)


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, a, b, loc, scale))
