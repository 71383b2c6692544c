"""Special functions around the gamma function, the Hurwitz zeta function and the
modified Bessel functions of orders 0 and 1, and the entropies ``rel_entr`` / ``kl_div``
(as ``jax.scipy.special``, with SciPy's values).

``zeta`` sums ``N`` terms and adds the Euler-Maclaurin tail (its Bernoulli coefficients
derived below, not tabulated), with a negative non-integer ``q`` taken back to positive
ones; ``polygamma`` is a scaled zeta. The Bessel functions add
the power series (positive terms, so no cancellation) up to ``|x| = 30`` and use the
asymptotic expansion beyond; their derivatives are closed forms in each other.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ember import lax
from ember import numpy as jnp
from ember.core import dtypes
from ember.errors import EmberTypeError
from ember.numpy._promotion import promote_args_inexact
from ember.transforms.custom import custom_jvp

__all__ = ["gamma", "gammasgn", "beta", "factorial", "comb", "poch", "multigammaln",
           "zeta", "polygamma", "i0", "i0e", "i1", "i1e", "rel_entr", "kl_div"]


def _real(name: str, *args: Any) -> list[Any]:
    arrays = promote_args_inexact(*args)
    if dtypes.is_complex(arrays[0].dtype):
        raise EmberTypeError(f"{name} does not support complex-valued inputs")
    return arrays


def gammasgn(x: Any) -> Any:
    """The sign of the gamma function: NaN at its poles, -1 where it is negative."""
    (x,) = _real("gammasgn", x)
    floor = lax.floor(x)
    negative = x < 0
    pole = (negative & (x == floor)) | jnp.isnan(x)
    minus = (negative & (jnp.fmod(floor, 2) != 0)) | ((x == 0) & jnp.signbit(x))
    return jnp.where(pole, np.nan, jnp.where(minus, -1.0, 1.0)).astype(x.dtype)


def gamma(x: Any) -> Any:
    """The gamma function (``inf`` at 0, NaN at the negative integers, as SciPy)."""
    (x,) = _real("gamma", x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def beta(a: Any, b: Any) -> Any:
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``."""
    a, b = _real("beta", a, b)
    log_abs = lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * lax.exp(log_abs)


def factorial(n: Any, exact: bool = False) -> Any:
    """``Gamma(n + 1)``, 0 for negative ``n`` (``exact=True``, exact integers, is not
    available on arrays, as in JAX)."""
    if exact:
        raise NotImplementedError("factorial with exact=True: use math.factorial on ints")
    (n,) = _real("factorial", n)
    return jnp.where(n < 0, jnp.zeros_like(n), lax.exp(lax.lgamma(n + 1)))


def comb(N: Any, k: Any, *, repetition: bool = False) -> Any:
    """The number of combinations of ``k`` among ``N`` (with ``repetition``: multisets),
    0 outside ``0 <= k <= N`` (floats: SciPy's ``exact=False``, JAX's signature)."""
    N, k = _real("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), jnp.ones_like(N), comb(N + k - 1, k))
    valid = (k <= N) & (N >= 0) & (k >= 0)
    safe_n, safe_k = jnp.where(valid, N, 0.0), jnp.where(valid, k, 0.0)
    log = lax.lgamma(safe_n + 1) - lax.lgamma(safe_k + 1) - lax.lgamma(safe_n + 1 - safe_k)
    return jnp.where(valid, lax.exp(log), jnp.zeros_like(log))


def poch(z: Any, m: Any) -> Any:
    """The rising factorial ``Gamma(z + m) / Gamma(z)`` (1 where ``m == 0``)."""
    z, m = _real("poch", z, m)
    return jnp.where(m == 0, jnp.ones_like(z), gamma(z + m) / gamma(z))


def multigammaln(a: Any, d: int) -> Any:
    """The log of the multivariate gamma function of dimension ``d``."""
    d = int(d)
    (a,) = _real("multigammaln", a)
    halves = jnp.arange(d, dtype=a.dtype) / 2
    terms = lax.lgamma(jnp.expand_dims(a, -1) - halves)
    return jnp.sum(terms, axis=-1) + 0.25 * d * (d - 1) * math.log(math.pi)


# --- zeta --------------------------------------------------------------------------

_N_TERMS = 10  # terms summed before the Euler-Maclaurin tail (its point is q + 10)


def _bernoulli_even(count: int) -> list[Fraction]:
    """B_2, B_4, ..., B_2count, from the recurrence sum_k C(m+1, k) B_k = 0."""
    numbers = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        numbers.append(-sum(math.comb(m + 1, k) * numbers[k] for k in range(m)) / (m + 1))
    return numbers[2::2]


# B_2j / (2j)!: the tail's coefficients; 12 leave under 1e-17 of zeta(2, q) at q + 10.
_TAIL = [float(b / math.factorial(2 * j)) for j, b in enumerate(_bernoulli_even(12), 1)]


def _zeta_series(x: Any, q: Any) -> Any:
    """``zeta(x, q)`` for ``x > 1`` (finite) and ``q > 0``: ``_N_TERMS`` terms and the
    Euler-Maclaurin tail at ``w = q + _N_TERMS``."""
    total = jnp.zeros_like(q)
    for k in range(_N_TERMS):
        total = total + jnp.power(q + k, -x)
    w = q + _N_TERMS
    # w ** (1 - x) taken whole, not as w * w ** -x: that underflows to 0 (or is inf * 0
    # at q = inf) where the tail's leading term, e.g. 1e-300 at (2, 1e300), does not
    w_pow_1 = jnp.power(w, 1 - x)
    w_pow = w_pow_1 / w
    total = total + w_pow_1 / (x - 1) + 0.5 * w_pow
    # The j-th correction is B_2j / (2j)! times x (x+1) ... (x+2j-2) w ** -(x+2j-1), that
    # product grown one ratio (x + i) / w at a time: at large x (float32 from x ~ 40) it
    # underflows to 0 and stays 0, where the rising factorial alone would overflow and
    # make 0 * inf = NaN.
    inv_w = 1 / w
    term = x * w_pow * inv_w
    for j, coefficient in enumerate(_TAIL):
        if j:
            term = term * ((x + (2 * j - 1)) * inv_w) * ((x + 2 * j) * inv_w)
        total = total + coefficient * term
    return total


def zeta(x: Any, q: Any = None) -> Any:
    """The Hurwitz zeta function ``sum_k (k + q) ** -x`` (``q=None``: Riemann's, q = 1).

    As SciPy: NaN for ``x < 1``, ``inf`` at ``x == 1`` and at the integers ``q <= 0``;
    for a negative non-integer ``q``, the series' value for an integer ``x`` and NaN for
    any other (``(k + q) ** -x`` is not real). At ``x = inf``: 1 at ``q == 1``, ``inf``
    below (some ``|k + q| < 1``) and 0 above, its limit (SciPy: NaN for most such q).
    """
    x, q = _real("zeta", x, 1.0 if q is None else q)
    x, q = jnp.broadcast_arrays(x, q)
    integer_q = (q <= 0) & (q == lax.floor(q))
    integer_x = x == lax.floor(x)
    # A negative non-integer q: with f = q - floor(q) in (0, 1) and m = -floor(q), the m
    # negative terms are (f - j) ** -x = (-1) ** x (j - f) ** -x for j = 1..m, whose sum
    # is zeta(x, 1 - f) - zeta(x, 1 - q); so three series at positive points give it, for
    # any q (SciPy sums term by term up to q + 9, so |q| steps).
    reflect = (q < 0) & ~integer_q & integer_x
    # The points stay positive where unused (so gradients get no NaN). 1 - f is taken as
    # ceil(q) - q, exact for q < 0: 1 - (q + 1) loses q's low bits (all of them at
    # q = -1e-9), and the largest term is (1 - f) ** -x. (Written so that gcc 12
    # vectorizes the float32 loop: some equivalent forms, e.g. a select of the point,
    # made it give up, and the kernel ~8x slower.)
    below = jnp.minimum(q, 0.0)
    direct = _zeta_series(x, q - lax.floor(below))  # q, or f where q < 0
    upper = _zeta_series(x, (lax.ceil(below) - below) + (q >= 0).astype(q.dtype))  # 1 - f
    lower = _zeta_series(x, 1 + jnp.abs(q))
    sign = jnp.where(x / 2 != lax.floor(x / 2), -1.0, 1.0).astype(x.dtype)  # (-1) ** x
    result = jnp.where(reflect, direct + sign * (upper - lower), direct)
    result = jnp.where((q < 0) & ~integer_x, np.nan, result)
    at_inf = jnp.where(q == 1, 1.0, jnp.where(q < 1, np.inf, jnp.where(q > 1, 0.0, np.nan)))
    result = jnp.where(x == np.inf, at_inf.astype(x.dtype), result)
    result = jnp.where(integer_q, np.inf, result)
    return jnp.where(x == 1, np.inf, jnp.where(x < 1, np.nan, result))


def polygamma(n: Any, x: Any) -> Any:
    """The ``n``-th derivative of the digamma function (``n`` an integer >= 0)."""
    n_dtype = np.asarray(n).dtype if not hasattr(n, "dtype") else n.dtype
    if not dtypes.is_integer(n_dtype):
        raise EmberTypeError(f"Argument `n` to polygamma must be of integer type, got dtype "
                             f"{n_dtype}; pass e.g. np.int32(n)")
    n, x = _real("polygamma", n, x)
    sign = jnp.where(jnp.fmod(n, 2) == 0, -1.0, 1.0).astype(x.dtype)
    higher = sign * lax.exp(lax.lgamma(n + 1)) * zeta(n + 1, x)
    return jnp.where(n == 0, lax.digamma(x), higher)


# --- modified Bessel functions --------------------------------------------------------

_SERIES_END = 30.0  # |x| up to which the power series is summed
_SERIES_TERMS = 64  # its last term is below 1e-22 of the sum at |x| = 30
_ASYMPTOTIC_TERMS = 20  # at |x| >= 30 the expansion's 20th term is below 1e-17


def _scaled_bessel(order: int, x: Any) -> Any:
    """``exp(-|x|) I_order(|x|)`` for ``order`` 0 or 1."""
    ax = jnp.abs(x)
    small = jnp.minimum(ax, _SERIES_END)
    y = small * small / 4
    term = jnp.ones_like(x) if order == 0 else small / 2
    total = term
    for k in range(1, _SERIES_TERMS):
        term = term * y / (k * (k + order))
        total = total + term
    series = total * lax.exp(-small)
    large = jnp.maximum(ax, _SERIES_END)
    mu = 4.0 * order * order
    term, total = jnp.ones_like(x), jnp.ones_like(x)
    for k in range(1, _ASYMPTOTIC_TERMS):
        term = term * -(mu - (2 * k - 1) ** 2) / (k * 8 * large)
        total = total + term
    asymptotic = total / jnp.sqrt(2 * math.pi * large)
    return jnp.where(ax <= _SERIES_END, series, asymptotic)


@custom_jvp
def i0e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``."""
    (x,) = _real("i0e", x)
    return _scaled_bessel(0, x)


@i0e.defjvp
def _i0e_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = i0e(x)
    return out, (i1e(x) - jnp.sign(x) * out) * t


@custom_jvp
def i1e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``."""
    (x,) = _real("i1e", x)
    return jnp.sign(x) * _scaled_bessel(1, x)


@i1e.defjvp
def _i1e_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = i1e(x)
    safe = jnp.where(x == 0, 1.0, x)
    slope = jnp.where(x == 0, 0.5, i0e(x) - out * (jnp.sign(x) + 1 / safe))  # (I1'(0) = 1/2)
    return out, slope * t


@custom_jvp
def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind of order 0."""
    (x,) = _real("i0", x)
    return lax.exp(jnp.abs(x)) * i0e(x)


@i0.defjvp
def _i0_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """I0' = I1, 0 at 0. (Differentiated as ``exp(|x|) * i0e(x)`` it would be JAX's 1 there:
    |x| has slope 1 at 0, i0e slope 0.)"""
    (x,), (t,) = primals, tangents
    return i0(x), i1(x) * t


def i1(x: Any) -> Any:
    """The modified Bessel function of the first kind of order 1."""
    (x,) = _real("i1", x)
    return lax.exp(jnp.abs(x)) * i1e(x)


# --- entropies --------------------------------------------------------------------------

def rel_entr(p: Any, q: Any) -> Any:
    """``p log(p / q)`` where both are positive, 0 where ``p == 0 <= q``, else ``inf``."""
    p, q = _real("rel_entr", p, q)
    both = (p > 0) & (q > 0)
    safe_p, safe_q = jnp.where(both, p, 1.0), jnp.where(both, q, 1.0)
    value = safe_p * (lax.log(safe_p) - lax.log(safe_q))
    return jnp.where(both, value, jnp.where((p == 0) & (q >= 0), 0.0, np.inf))


def kl_div(p: Any, q: Any) -> Any:
    """``rel_entr(p, q) - p + q``: the elementwise Kullback-Leibler divergence."""
    p, q = _real("kl_div", p, q)
    return rel_entr(p, q) - p + q
