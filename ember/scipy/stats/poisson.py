"""The Poisson distribution (as ``jax.scipy.stats.poisson``)."""
from __future__ import annotations

import math
from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import gammaincc, gammaln, xlogy

__all__ = ["cdf", "entropy", "logpmf", "pmf"]


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


# Below this mean the entropy is summed over k < _TERMS (which then holds all but a
# negligible tail of the mass); above it, its asymptotic expansion, to about 1e-11.
_SUM_BELOW = 300.0
_TERMS = 512


def entropy(mu: Any, loc: Any = 0) -> Any:
    """``-sum_k pmf(k) log pmf(k)`` (``loc`` only shifts the support)."""
    mu, loc = promote_args_inexact(mu, loc)
    small_mu = jnp.clip(mu, 0, _SUM_BELOW)
    k = jnp.arange(_TERMS, dtype=mu.dtype)
    log_pmf = logpmf(k, small_mu[..., None])
    summed = -jnp.sum(jnp.exp(log_pmf) * jnp.where(jnp.isfinite(log_pmf), log_pmf, 0), axis=-1)
    large_mu = jnp.maximum(mu, _SUM_BELOW)
    asymptotic = (0.5 * jnp.log(2 * math.pi * math.e * large_mu) - 1 / (12 * large_mu)
                  - 1 / (24 * large_mu**2) - 19 / (360 * large_mu**3))
    out = jnp.where(mu < _SUM_BELOW, summed, asymptotic)
    return jnp.where(mu < 0, jnp.nan, out)
