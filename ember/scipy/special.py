"""``ember.scipy.special``: special functions (as ``jax.scipy.special``).

Built from the primitives (erf, erf_inv, lgamma, digamma, logistic) and ember.numpy.
Where a composition would differentiate badly (``xlogy`` at ``x = 0``, ``ndtri``'s
Newton steps, ``log_ndtr``'s branches), a custom JVP gives the closed-form derivative,
as JAX does. ``logsumexp``, ``softmax`` and ``log_softmax`` are ``ember.nn``'s; the
incomplete gamma and beta functions live in ``_incomplete``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import lax
from ember import numpy as jnp
from ember.nn import activations as _nn
from ember.numpy._promotion import promote_args_inexact
from ember.scipy._gamma_zeta_bessel import *  # noqa: F401,F403
from ember.scipy._gamma_zeta_bessel import __all__ as _gamma_zeta_bessel_names
from ember.scipy._incomplete import betainc, gammainc, gammaincc
from ember.transforms.custom import custom_jvp

__all__ = [
    "betainc",
    "betaln",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "gammainc",
    "gammaincc",
    "gammaln",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "ndtri",
    "softmax",
    "xlog1py",
    "xlogy",
    *_gamma_zeta_bessel_names,
]

logsumexp = _nn.logsumexp

Axis = int | tuple[int, ...] | None


def softmax(x: Any, /, *, axis: Axis = None) -> Any:
    """``exp(x) / sum(exp(x))`` over ``axis`` (all axes by default, as SciPy)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x: Any, /, *, axis: Axis = None) -> Any:
    """``x - logsumexp(x)`` over ``axis`` (all axes by default, as SciPy)."""
    return _nn.log_softmax(x, axis=axis)


def _inexact(*args: Any) -> list[Any]:
    return promote_args_inexact(*args)


def erf(x: Any) -> Any:
    (x,) = _inexact(x)
    return lax.erf(x)


def erfc(x: Any) -> Any:
    (x,) = _inexact(x)
    return lax.erfc(x)


def erfinv(x: Any) -> Any:
    (x,) = _inexact(x)
    return lax.erf_inv(x)


def gammaln(x: Any) -> Any:
    """``log(|Gamma(x)|)``."""
    (x,) = _inexact(x)
    return lax.lgamma(x)


def digamma(x: Any) -> Any:
    (x,) = _inexact(x)
    return lax.digamma(x)


def betaln(a: Any, b: Any) -> Any:
    """``log(|B(a, b)|)``, the log of the beta function."""
    a, b = _inexact(a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def expit(x: Any) -> Any:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    (x,) = _inexact(x)
    return lax.logistic(x)


@custom_jvp
def logit(x: Any) -> Any:
    """``log(x / (1 - x))``, the inverse of ``expit``."""
    (x,) = _inexact(x)
    return lax.log(x / (1 - x))


@logit.defjvp
def _logit_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """``1 / (x (1 - x))``, as JAX's: infinite at 0 and 1, -0 at the infinities (through
    the quotient inside the log they would be NaN)."""
    (x,), (x_dot,) = primals, tangents
    return logit(x), x_dot / (x * (1 - x))


@custom_jvp
def xlogy(x: Any, y: Any) -> Any:
    """``x * log(y)``, and 0 where ``x == 0`` (even where ``y == 0``)."""
    x, y = _inexact(x, y)
    return jnp.where(x != 0, x * lax.log(y), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlogy(x, y)
    return out, (x_dot * jnp.log(y) + y_dot * x / y).astype(out.dtype)


@custom_jvp
def xlog1py(x: Any, y: Any) -> Any:
    """``x * log1p(y)``, and 0 where ``x == 0`` (even where ``y == -1``)."""
    x, y = _inexact(x, y)
    return jnp.where(x != 0, x * lax.log1p(y), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlog1py(x, y)
    return out, (x_dot * jnp.log1p(y) + y_dot * x / (1 + y)).astype(out.dtype)


@custom_jvp
def entr(x: Any) -> Any:
    """``-x * log(x)`` for ``x >= 0`` (0 at 0), ``-inf`` for ``x < 0``."""
    (x,) = _inexact(x)
    return jnp.where(x < 0, -jnp.inf, -xlogy(x, x))


@entr.defjvp
def _entr_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """``-(1 + log x)``, as JAX's: +inf at 0 (through ``xlogy(x, x)`` it would be 0 / 0),
    -inf at +inf, NaN below 0."""
    (x,), (x_dot,) = primals, tangents
    return entr(x), -(1 + jnp.log(x)) * x_dot


_SQRT_HALF = math.sqrt(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def ndtr(x: Any) -> Any:
    """The standard normal CDF. ``erfc`` in the tails keeps small values accurate
    (``0.5 * (1 + erf(z))`` would round them to 0)."""
    (x,) = _inexact(x)
    z = x * _SQRT_HALF
    y = jnp.where(jnp.abs(z) < _SQRT_HALF, 1 + lax.erf(z),
                  jnp.where(z > 0, 2 - lax.erfc(z), lax.erfc(-z)))
    return 0.5 * y


def _log_ndtr_lower_bound(dtype: np.dtype) -> float:
    """Below this, ``ndtr`` underflows: an asymptotic series takes over."""
    return -20.0 if np.dtype(dtype) == np.float64 else -10.0


def _log_ndtr_series(x: Any, series_order: int) -> Any:
    """``log(ndtr(x))`` for large negative ``x``: the asymptotic expansion of the normal
    tail, ``pdf(x) / -x * (1 + sum_n (-1)^n (2n-1)!! / x^(2n))``."""
    x_sq = x * x
    total, term, x_pow = 1.0, 1.0, 1.0
    for n in range(1, series_order + 1):
        term *= -(2 * n - 1)
        x_pow = x_pow * x_sq
        total = total + term / x_pow
    return -0.5 * x_sq - jnp.log(-x) - _LOG_SQRT_2PI + jnp.log(total)


def log_ndtr(x: Any, series_order: int = 3) -> Any:
    """``log(ndtr(x))``, accurate far into both tails."""
    if not isinstance(series_order, int) or not 0 <= series_order <= 30:
        raise ValueError(f"log_ndtr: series_order must be an int in [0, 30], got "
                         f"{series_order!r}")
    (x,) = _inexact(x)
    return _log_ndtr(x, series_order)


def _log_ndtr_impl(x: Any, series_order: int) -> Any:
    lower = _log_ndtr_lower_bound(x.dtype)
    # Each branch sees only inputs in its own range, so no branch makes inf or NaN. Above
    # 0, log1p(-ndtr(-x)) keeps the digits that log(ndtr(x)) rounds away near 1.
    tail = _log_ndtr_series(jnp.minimum(x, lower), series_order)
    negative = jnp.log(ndtr(jnp.clip(x, lower, 0)))
    positive = jnp.log1p(-ndtr(-jnp.maximum(x, 0)))
    return jnp.where(x > 0, positive, jnp.where(x > lower, negative, tail))


_log_ndtr = custom_jvp(_log_ndtr_impl, nondiff_argnums=(1,))


@_log_ndtr.defjvp
def _log_ndtr_jvp(series_order: int, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """``d/dx log(ndtr(x)) = pdf(x) / ndtr(x)``, formed in log space (both underflow)."""
    (x,), (x_dot,) = primals, tangents
    out = _log_ndtr(x, series_order)
    return out, x_dot * jnp.exp(-0.5 * x * x - _LOG_SQRT_2PI - out)


# Terms of log_ndtr's tail series for ndtri: its error stays below float64's roundoff
# just past the series' threshold (order 3 leaves about 1e-11 there).
_NDTRI_SERIES_ORDER = 12


@custom_jvp
def _ndtri(p: Any) -> Any:
    """Solve ``log_ndtr(x) = log(q)`` for the lower tail ``q = min(p, 1 - p)`` by Newton
    steps, which converge from either start; the upper half follows by symmetry."""
    q = jnp.minimum(p, 1 - p)
    safe_q = jnp.clip(q, jnp.finfo(p.dtype).tiny, 0.5)
    log_q = jnp.log(safe_q)
    # Start: the inverse error function in the middle, the tail asymptote below 1e-3
    # (where 2q - 1 rounds towards -1 and erf_inv loses its digits).
    t = -2 * log_q
    asymptote = -jnp.sqrt(t - jnp.log(t) - math.log(2 * math.pi))
    central = math.sqrt(2) * lax.erf_inv(2 * safe_q - 1)
    x = jnp.where(safe_q < 1e-3, asymptote, central)
    for _ in range(4):
        log_cdf = _log_ndtr_impl(x, _NDTRI_SERIES_ORDER)
        x = x - (log_cdf - log_q) * jnp.exp(log_cdf + 0.5 * x * x + _LOG_SQRT_2PI)
    x = jnp.where(q == 0, -jnp.inf, x)
    x = jnp.where((p < 0) | (p > 1) | jnp.isnan(p), jnp.nan, x)
    return jnp.where(p > 0.5, -x, x)


@_ndtri.defjvp
def _ndtri_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """``d/dp ndtri(p) = 1 / pdf(ndtri(p))``."""
    (p,), (p_dot,) = primals, tangents
    x = _ndtri(p)
    return x, p_dot * jnp.exp(0.5 * x * x + _LOG_SQRT_2PI)


def ndtri(p: Any) -> Any:
    """The inverse of ``ndtr``: the standard normal quantile of ``p``."""
    (p,) = _inexact(p)
    return _ndtri(p)


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
