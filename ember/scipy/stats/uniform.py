"""The uniform distribution on ``[loc, loc + scale]`` (as ``jax.scipy.stats.uniform``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    outside = (x < loc) | (x > loc + scale)
    return jnp.where(outside, -jnp.inf, -jnp.log(scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return jnp.clip((x - loc) / scale, 0, 1)


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote_args_inexact(q, loc, scale)
    return jnp.where((q < 0) | (q > 1), jnp.nan, loc + q * scale)
