"""The normal distribution (as ``jax.scipy.stats.norm``)."""
from __future__ import annotations

import math
from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import log_ndtr, ndtr, ndtri

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _standardized(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = _standardized(x, loc, scale)
    return -0.5 * z * z - jnp.log(scale) - _LOG_SQRT_2PI


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return ndtr(_standardized(x, loc, scale)[0])


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return log_ndtr(_standardized(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - cdf``, computed as the lower tail of ``-x`` so that small values keep their
    digits."""
    return ndtr(-_standardized(x, loc, scale)[0])


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return log_ndtr(-_standardized(x, loc, scale)[0])


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote_args_inexact(q, loc, scale)
    return ndtri(q) * scale + loc


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote_args_inexact(q, loc, scale)
    return loc - ndtri(q) * scale
