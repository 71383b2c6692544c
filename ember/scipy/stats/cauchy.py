"""The Cauchy distribution (as ``jax.scipy.stats.cauchy``)."""
from __future__ import annotations

import math
from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _standardized(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = _standardized(x, loc, scale)
    return -math.log(math.pi) - jnp.log(scale) - jnp.log1p(z * z)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def _lower_tail(z: Any) -> Any:
    """``1/2 + atan(z)/pi``; for ``z < 0`` as ``atan(-1/z)/pi``, which keeps the digits
    of a small tail probability."""
    safe = jnp.where(z < 0, z, -1)
    return jnp.where(z < 0, jnp.arctan(-1 / safe) / math.pi, 0.5 + jnp.arctan(z) / math.pi)


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return _lower_tail(_standardized(x, loc, scale)[0])


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return _lower_tail(-_standardized(x, loc, scale)[0])


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(sf(x, loc, scale))


def _quantile(q: Any) -> Any:
    """The standard quantile ``tan(pi (q - 1/2))`` of ``q``; in the tails as ``-cot(pi q)``
    (``cot(pi (1 - q))`` above), which keeps the digits that rounding ``q - 1/2`` loses,
    and is exactly infinite at 0 and 1."""
    central = jnp.abs(q - 0.5) < 0.25
    tail = jnp.where(q < 0.5, q, 1 - q)
    safe_tail = jnp.where(central, 0.25, tail)
    cot = jnp.where(safe_tail == 0, jnp.inf, 1 / jnp.tan(math.pi * safe_tail))
    z = jnp.where(central, jnp.tan(math.pi * (q - 0.5)), jnp.where(q < 0.5, -cot, cot))
    return jnp.where((q < 0) | (q > 1), jnp.nan, z)


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote_args_inexact(q, loc, scale)
    return loc + scale * _quantile(q)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote_args_inexact(q, loc, scale)
    return loc - scale * _quantile(q)
