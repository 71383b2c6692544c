"""The Laplace (double exponential) distribution (as ``jax.scipy.stats.laplace``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    return -jnp.log(2 * scale) - jnp.abs(x - loc) / scale


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote_args_inexact(x, loc, scale)
    z = (x - loc) / scale
    half_tail = 0.5 * jnp.exp(-jnp.abs(z))
    return jnp.where(z < 0, half_tail, 1 - half_tail)
