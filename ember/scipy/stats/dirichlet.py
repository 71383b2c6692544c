"""The Dirichlet distribution over the simplex (as ``jax.scipy.stats.dirichlet``).

``x`` holds the categories on its first axis: ``K`` of them, or ``K - 1`` (the last is
then ``1 - sum``); further axes are independent points.
"""
from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.errors import EmberValueError
from ember.numpy._promotion import inexact_dtype, result_dtype
from ember.scipy.special import gammaln, xlogy

__all__ = ["logpdf", "pdf"]


def _on_simplex(x: Any) -> Any:
    return jnp.all(x >= 0, axis=0) & jnp.isclose(jnp.sum(x, axis=0), 1)


def logpdf(x: Any, alpha: Any) -> Any:
    dtype = inexact_dtype(result_dtype(x, alpha))
    x, alpha = jnp.asarray(x, dtype), jnp.asarray(alpha, dtype)
    if alpha.ndim != 1:
        raise EmberValueError(f"dirichlet.logpdf: alpha must be one-dimensional, got shape "
                              f"{tuple(alpha.shape)}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise EmberValueError(f"dirichlet.logpdf: x must have {k} or {k - 1} entries on its "
                              f"first axis to match alpha of shape {(k,)}, got shape "
                              f"{tuple(x.shape)}")
    if x.shape[0] == k - 1:
        x = jnp.concatenate([x, 1 - jnp.sum(x, axis=0, keepdims=True)], axis=0)
    normalizer = jnp.sum(gammaln(alpha)) - gammaln(jnp.sum(alpha))
    alpha = jnp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))
    on_simplex = _on_simplex(x)
    # Off the simplex a stand-in point keeps log(x) and its gradient finite.
    x = jnp.where(on_simplex, x, 1 / k)
    log_probs = jnp.sum(xlogy(alpha - 1, x), axis=0) - normalizer
    return jnp.where(on_simplex, log_probs, -jnp.inf)


def pdf(x: Any, alpha: Any) -> Any:
    return jnp.exp(logpdf(x, alpha))


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
