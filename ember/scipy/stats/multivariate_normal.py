"""The multivariate normal distribution (as ``jax.scipy.stats.multivariate_normal``).

``mean`` is a scalar or has the event size ``n`` last; ``cov`` is a scalar (a multiple of
the identity), or ``(..., n, n)``. The density goes through the Cholesky factor, so a
covariance that is not positive definite gives NaN.
"""
from __future__ import annotations

import math
from typing import Any

from ember import numpy as jnp
from ember.errors import EmberValueError
from ember.lax import linalg as lax_linalg
from ember.numpy._promotion import inexact_dtype, result_dtype

__all__ = ["logpdf", "pdf"]

_LOG_2PI = math.log(2 * math.pi)


def _whitened(cholesky: Any, y: Any) -> Any:
    """``L^-1 y`` for one factor ``L`` and one vector ``y``."""
    return lax_linalg.triangular_solve(cholesky, y[:, None], left_side=True, lower=True)[:, 0]


_whiten = jnp.vectorize(_whitened, signature="(n,n),(n)->(n)")


def logpdf(x: Any, mean: Any, cov: Any, allow_singular: None = None) -> Any:
    if allow_singular is not None:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular is not "
                                  "supported (as in JAX); pass None")
    dtype = inexact_dtype(result_dtype(x, mean, cov))
    x, mean, cov = (jnp.asarray(v, dtype) for v in (x, mean, cov))
    if mean.ndim == 0:
        return -0.5 * (x - mean) ** 2 / cov - 0.5 * (_LOG_2PI + jnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if cov.ndim == 0:
        return -0.5 * jnp.sum(y * y, axis=-1) / cov - 0.5 * n * (_LOG_2PI + jnp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise EmberValueError(f"multivariate_normal.logpdf: cov must be a scalar or have "
                              f"shape (..., {n}, {n}) to match mean of shape "
                              f"{tuple(mean.shape)}, got {tuple(cov.shape)}")
    factor = lax_linalg.cholesky(cov)
    z = _whiten(factor, y)
    log_det = jnp.sum(jnp.log(jnp.diagonal(factor, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * jnp.sum(z * z, axis=-1) - 0.5 * n * _LOG_2PI - log_det


def pdf(x: Any, mean: Any, cov: Any) -> Any:
    return jnp.exp(logpdf(x, mean, cov))


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
