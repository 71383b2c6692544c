"""The beta distribution on ``[loc, loc + scale]`` (as ``jax.scipy.stats.beta``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import betainc, betaln, xlog1py, xlogy

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


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


def _standardized(x: Any, loc: Any, scale: Any) -> Any:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return jnp.clip((x - loc) / scale, 0, 1)


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    a, b = promote_args_inexact(a, b)
    return betainc(a, b, _standardized(x, loc, scale))


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - cdf``, as ``I_{1-y}(b, a)`` (small tails keep their digits)."""
    a, b = promote_args_inexact(a, b)
    return betainc(b, a, 1 - _standardized(x, loc, scale))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(sf(x, a, b, loc, scale))
