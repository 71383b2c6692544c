"""The logistic distribution (as ``jax.scipy.stats.logistic``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import expit, logit

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def _standardized(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-|z| - 2 log1p(exp(-|z|)) - log(scale)``: symmetric, so exp never overflows."""
    z, scale = _standardized(x, loc, scale)
    a = jnp.abs(z)
    return -a - 2 * jnp.log1p(jnp.exp(-a)) - jnp.log(scale)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return expit(_standardized(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return expit(-_standardized(x, loc, scale)[0])


def ppf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return logit(x) * scale + loc


def isf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return loc - logit(x) * scale
