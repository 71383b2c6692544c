"""The Bernoulli distribution (as ``jax.scipy.stats.bernoulli``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import xlog1py, xlogy

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    k, p, loc = promote_args_inexact(k, p, loc)
    x = k - loc
    log_probs = xlogy(x, p) + xlog1py(1 - x, -p)
    return jnp.where((x != 0) & (x != 1), -jnp.inf, log_probs)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, p, loc))


def _invalid(p: Any) -> Any:
    return jnp.isnan(p) | (p < 0) | (p > 1)


def cdf(k: Any, p: Any) -> Any:
    k, p = promote_args_inexact(k, p)
    out = jnp.where(k < 0, 0, jnp.where(k < 1, 1 - p, 1)).astype(k.dtype)
    return jnp.where(_invalid(p) | jnp.isnan(k), jnp.nan, out)


def ppf(q: Any, p: Any) -> Any:
    """The least ``k`` in {0, 1} with ``cdf(k) >= q`` (NaN outside ``0 <= q <= 1``)."""
    q, p = promote_args_inexact(q, p)
    out = jnp.where(q <= 1 - p, 0, 1).astype(q.dtype)
    return jnp.where(_invalid(p) | jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, out)
