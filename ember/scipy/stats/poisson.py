"""The Poisson distribution (as ``jax.scipy.stats.poisson``)."""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import gammaincc, gammaln, xlogy

__all__ = ["cdf", "logpmf", "pmf"]


def logpmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    k, mu, loc = promote_args_inexact(k, mu, loc)
    x = k - loc
    log_probs = xlogy(x, mu) - gammaln(x + 1) - mu
    return jnp.where((x < 0) | (x != jnp.round(x)), -jnp.inf, log_probs)


def pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``P(K <= k) = Q(floor(k) + 1, mu)``, the upper incomplete gamma function."""
    k, mu, loc = promote_args_inexact(k, mu, loc)
    x = k - loc
    count = jnp.floor(jnp.maximum(x, 0))
    return jnp.where(x < 0, 0, gammaincc(count + 1, mu))
