"""The gamma distribution with shape ``a`` (as ``jax.scipy.stats.gamma``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import gammainc, gammaincc, gammaln, xlogy

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, loc, scale = promote_args_inexact(x, a, loc, scale)
    inside = x >= loc
    # Outside the support a stand-in point keeps log(y) and its gradient finite.
    y = jnp.where(inside, (x - loc) / scale, 1)
    log_probs = xlogy(a - 1, y) - y - gammaln(a) - jnp.log(scale)
    return jnp.where(inside, log_probs, -jnp.inf)


def pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, a, loc, scale))


def _standardized(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return jnp.maximum((x - loc) / scale, 0), scale


def cdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return gammainc(a, _standardized(x, loc, scale)[0])


def logcdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cdf(x, a, loc, scale))


def sf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - cdf``, from the upper incomplete gamma function (small tails keep their
    digits)."""
    return gammaincc(a, _standardized(x, loc, scale)[0])


def logsf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(sf(x, a, loc, scale))
