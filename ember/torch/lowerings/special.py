"""Lowerings of ATen's special functions (``torch.special``: Bessel functions, orthogonal
polynomials, gamma-related functions).

Where ``ember.scipy.special`` has the function, the lowering is a call; the others follow
ATen's own definitions (``ATen/native/Math.h``): the orthogonal polynomials' recurrences
and closed forms, and the Cephes approximations of the Bessel functions."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import ember.numpy as jnp
import ember.scipy.special as jsp
from ember import lax
from ember.torch.lowerings.table import aten, cast, elementwise, lowers, register_elementwise
from ember.torch.promotion import Kind, promote

_INV_SQRT_PI = 1 / math.sqrt(math.pi)


# --- error, normal-distribution, gamma and zeta functions -------------------------------

def _erfcx(x: Any) -> Any:
    """``exp(x^2) erfc(x)``: the product directly up to 4, Laplace's continued fraction
    ``1 / sqrt(pi) / (x + 1/2 / (x + 1 / (x + 3/2 / ...)))`` beyond (where ``erfc``
    underflows); ``2 exp(x^2) - erfcx(-x)`` for negative ``x``."""
    ax = jnp.abs(x)
    near = jnp.minimum(ax, 4.0)
    direct = jnp.exp(near * near) * lax.erfc(near)
    far = jnp.maximum(ax, 4.0)
    fraction = far
    for k in range(24, 0, -1):
        fraction = far + (k / 2) / fraction
    tail = _INV_SQRT_PI / fraction
    positive = jnp.where(ax < 4.0, direct, tail)
    # (only the negative side needs exp(x^2); clamp it where the positive side is taken)
    square = jnp.square(jnp.minimum(x, 0.0))
    return jnp.where(x < 0, 2 * jnp.exp(square) - positive, positive)


register_elementwise({
    (aten.i0.default, aten.special_modified_bessel_i0.default): jsp.i0,
    (aten.special_i0e.default,): jsp.i0e,
    (aten.special_i1.default, aten.special_modified_bessel_i1.default): jsp.i1,
    (aten.special_i1e.default,): jsp.i1e,
    (aten.special_ndtri.default,): jsp.ndtri,
    (aten.special_log_ndtr.default,): jsp.log_ndtr,
    (aten.special_erfcx.default,): _erfcx,
}, Kind.INT_TO_FLOAT)


def _igamma_boundaries(a: Any, x: Any, value: Any, upper: bool) -> Any:
    """ATen's (SciPy's) boundary values of the regularized incomplete gamma functions:
    NaN for negative arguments, the limits at ``a = 0``, ``x = 0`` and infinite ones."""
    one, zero = (0.0, 1.0) if upper else (1.0, 0.0)  # (the values at x = inf and x = 0)
    at_a_zero = jnp.where(x > 0, one, np.nan)
    at_a_inf = jnp.where(jnp.isinf(x), np.nan, zero)
    value = jnp.where(jnp.isinf(x), one, value)
    value = jnp.where(jnp.isinf(a), at_a_inf, value)
    value = jnp.where(x == 0, zero, value)
    value = jnp.where(a == 0, at_a_zero, value)
    return jnp.where((x < 0) | (a < 0), np.nan, value)


register_elementwise({
    (aten.igamma.default,): lambda a, x: _igamma_boundaries(a, x, jsp.gammainc(a, x), False),
    (aten.igammac.default,): lambda a, x: _igamma_boundaries(a, x, jsp.gammaincc(a, x), True),
}, Kind.INT_TO_FLOAT)


def _shift_to_nonnegative(x: Any, q: Any) -> tuple[Any, Any]:
    """For an integer order ``x``, ``sum_(k < m) (q + k)^-x`` and ``q + m``, ``m`` the
    count that takes ``q`` to 0 or above: ATen sums zeta's series from any ``q`` then,
    where ``ember.scipy.special.zeta`` is NaN below -1. (Terms added one at a time.)"""
    odd = jnp.fmod(x, 2) != 0

    def shifting(q: Any) -> Any:
        # (not where q + 1 rounds to q, which ATen's loop never leaves)
        return (q < 0) & (q + 1 != q) & (x > 1) & (x == jnp.floor(x))

    def cond(carry: tuple[Any, Any]) -> Any:
        return jnp.any(shifting(carry[0]))

    def body(carry: tuple[Any, Any]) -> tuple[Any, Any]:
        q, total = carry
        left = shifting(q)
        power = jnp.power(jnp.abs(q), -x)
        term = jnp.where(left, jnp.where(odd, -power, power), 0.0)
        return jnp.where(left, q + 1, q), total + term

    x, q = jnp.broadcast_arrays(x, q)
    q, total = lax.while_loop(cond, body, (q, jnp.zeros_like(q)))
    return total, q


def _zeta(x: Any, q: Any) -> Any:
    """The Hurwitz zeta function as ATen's: its series summed in double precision (ATen's
    accumulation type on CPU), also from negative ``q`` for an integer order."""
    wide = np.dtype(np.float64)
    total, shifted = _shift_to_nonnegative(cast(x, wide), cast(q, wide))
    value = cast(total + jsp.zeta(cast(x, wide), shifted), x.dtype)
    # x = inf, where ember's zeta is NaN: ATen's series stops at 1 for q = 1, is inf below
    # (some |q + k| < 1) and NaN above (its tail is inf * 0)
    at_inf = jnp.where(q == 1, 1.0, jnp.where(q < 1, np.inf, np.nan))
    return jnp.where(x == np.inf, at_inf, value)


register_elementwise({
    (aten.special_zeta.default, aten.special_zeta.other_scalar,
     aten.special_zeta.self_scalar): _zeta,
}, Kind.INT_TO_FLOAT)


def _trigamma(x: Any) -> Any:
    """ATen's trigamma (its polygamma of order 1), whose float32 rounding near the poles
    the sweep compares with: the reflection ``pi^2 / sin(pi x)^2 - trigamma(1 - x)`` below
    1/2, six terms of the series, then the asymptotic expansion."""
    reflect = x < 0.5
    sin_pi_x = jnp.sin(math.pi * x)
    y = jnp.where(reflect, 1 - x, x)
    total = jnp.zeros_like(x)
    for _ in range(6):
        total = total + 1 / (y * y)
        y = y + 1
    ixx = 1 / (y * y)
    total = total + (1 + 1 / (2 * y) + ixx * (1 / 6 - ixx * (1 / 30 - ixx * (1 / 42)))) / y
    return jnp.where(reflect, math.pi ** 2 / (sin_pi_x * sin_pi_x) - total, total)


@lowers(aten.polygamma.default)
def _polygamma(n: int, x: Any) -> Any:
    """``digamma`` for n = 0, else ``(-1)^(n+1) n! zeta(n + 1, x)``."""
    compute, result = promote(x, kind=Kind.INT_TO_FLOAT)
    x = cast(x, compute)
    if n == 0:
        return cast(lax.digamma(x), result)
    if n == 1:
        return cast(_trigamma(x), result)
    sign = 1.0 if n % 2 else -1.0
    return cast(sign * math.factorial(n) * _zeta(jnp.full_like(x, n + 1), x), result)


def _spherical_bessel_j0(x: Any) -> Any:
    """``sin(x) / x``, by its Taylor polynomial below 0.5 as ATen (0 at infinity)."""
    small = jnp.abs(x) < 0.5
    x2 = jnp.square(jnp.where(small, x, 0.0))
    series = 1.0
    for k in range(12, 0, -2):  # 1 - x^2/3! + x^4/5! - ... - x^12/13!, Horner's rule
        series = 1.0 - x2 / ((k + 1) * k) * series
    safe = jnp.where(small, 1.0, x)
    return jnp.where(small, series, jnp.where(jnp.isinf(x), 0.0, jnp.sin(safe) / safe))


register_elementwise({
    (aten.special_spherical_bessel_j0.default,): _spherical_bessel_j0,
}, Kind.INT_TO_FLOAT)


# --- orthogonal polynomials ------------------------------------------------------------

# ATen evaluates each polynomial for an integer degree n (the float truncated; NaN and
# infinite degrees give 0, as n < 0 does) by its three-term recurrence
# "p, q = q, step(j, p, q)" from (1, q0): n - 1 steps, j = 1, 2, ..., stopping early once
# q is NaN where ATen does. The degree is a tensor, so one while_loop runs the steps of
# every element, each masked past its own count.

Step = Callable[[Any, Any, Any, Any], Any]  # (j, x, p, q) -> the next value


def _degree(n: Any) -> Any:
    """ATen's ``static_cast<int64_t>(n)`` as a float: truncated, -1 where not finite."""
    return jnp.where(jnp.isfinite(n), jnp.trunc(n), -1.0)


def _recurrence(x: Any, n: Any, q0: Any, step: Step, runs: Any, stop_at_nan: bool) -> Any:
    """The value after ``n - 1`` steps from ``(1, q0)`` where ``runs`` (else ``q0``)."""
    x, n, runs = jnp.broadcast_arrays(x, n, runs)
    p0 = jnp.ones_like(x)
    q0 = jnp.broadcast_to(q0, x.shape)

    def running(j: Any, q: Any) -> Any:
        go = runs & (j < n)
        return go & ~jnp.isnan(q) if stop_at_nan else go

    def cond(carry: tuple[Any, Any, Any]) -> Any:
        j, _, q = carry
        return jnp.any(running(cast(j, x.dtype), q))

    def body(carry: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        j, p, q = carry
        k = cast(j, x.dtype)
        go = running(k, q)
        return j + 1, jnp.where(go, q, p), jnp.where(go, step(k, x, p, q), q)

    # (an integer count: a float one would stop growing at 2^24 in float32)
    start = (jnp.ones((), np.int32), p0, q0)
    return lax.while_loop(cond, body, start)[2]


def _chebyshev_step(j: Any, x: Any, p: Any, q: Any) -> Any:
    return (x + x) * q - p


def _by_degree(n: Any, at_0: Any, at_1: Any, otherwise: Any) -> Any:
    """ATen's leading cases: 0 for n < 0, then the degrees 0 and 1, then the rest."""
    return jnp.where(n < 0, 0.0, jnp.where(n == 0, at_0, jnp.where(n == 1, at_1, otherwise)))


def _at_plus_minus_one(x: Any, at_plus: Any, at_minus_even: Any, at_minus_odd: Any,
                       n: Any, otherwise: Any) -> Any:
    """The values at ``x = 1`` and ``x = -1`` (there by the degree's parity)."""
    even = jnp.fmod(n, 2) == 0
    minus = jnp.where(even, at_minus_even, at_minus_odd)
    return jnp.where(x == 1, at_plus, jnp.where(x == -1, minus, otherwise))


def _chebyshev(x: Any, n: Any, q0: Any, closed_from: int, closed: Callable[[Any], Any],
               ends: tuple[Any, Any, Any]) -> Any:
    """A Chebyshev polynomial of degree ``n`` (truncated): its closed form in
    ``theta = acos(x)`` for ``|x| < 1`` above degree ``closed_from``, the recurrence below
    and outside; ``ends`` its values at x = 1 and at x = -1 for even and odd degrees."""
    inside = jnp.abs(x) < 1
    use_closed = (n > closed_from) & inside
    steps = _recurrence(x, n, q0, _chebyshev_step, ~use_closed & (jnp.abs(x) != 1), True)
    # (acos in double, rounded: libm's float acos is correctly rounded, and the closed
    # forms multiply its error by n)
    theta = cast(jnp.arccos(cast(jnp.where(inside, x, 0.0), np.dtype(np.float64))), x.dtype)
    value = jnp.where(use_closed, closed(theta), _by_degree(n, 1.0, q0, steps))
    return jnp.where(n < 0, 0.0, _at_plus_minus_one(x, *ends, n, value))


def _chebyshev_t(x: Any, n: Any) -> Any:
    n = _degree(n)
    return _chebyshev(x, n, x, 6, lambda theta: jnp.cos(n * theta), (1.0, 1.0, -1.0))


def _chebyshev_u(x: Any, n: Any) -> Any:
    n = _degree(n)

    def closed(theta: Any) -> Any:
        sine = jnp.sin(theta)
        safe = jnp.where(sine != 0, sine, 1.0)
        return jnp.where(sine != 0, jnp.sin((n + 1) * theta) / safe,
                         (n + 1) * jnp.cos((n + 1) * theta) / x)

    return _chebyshev(x, n, x + x, 8, closed, (n + 1, n + 1, -(n + 1)))


def _chebyshev_v(x: Any, n: Any) -> Any:
    n = _degree(n)
    odd_sign = jnp.where(jnp.fmod(n, 2) == 0, 1.0, -1.0)

    def closed(theta: Any) -> Any:
        half = theta / 2
        return jnp.where(jnp.sin(half) != 1, jnp.cos((n + 0.5) * theta) / jnp.cos(half),
                         odd_sign * (n + n + 1))

    return _chebyshev(x, n, x + x - 1, 8, closed, (1.0, n + n + 1, -(n + n + 1)))


def _chebyshev_w(x: Any, n: Any) -> Any:
    n = _degree(n)

    def closed(theta: Any) -> Any:
        half = theta / 2
        at_one = jnp.where(x > 0, n + n + 1, jnp.where(jnp.fmod(n, 2) == 0, 1.0, -1.0))
        return jnp.where(jnp.cos(half) != 1, jnp.sin((n + 0.5) * theta) / jnp.sin(half),
                         at_one)

    return _chebyshev(x, n, x + x + 1, 8, closed, (n + n + 1, 1.0, -1.0))


def _shifted(polynomial: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The polynomial of ``2x - 1``: ATen's shifted Chebyshev polynomials (which it
    computes in x itself, equal up to rounding)."""
    return lambda x, n: polynomial(x + x - 1, n)


def _hermite_limit(x: Any) -> int:
    """The degree above which ATen gives NaN for Hermite polynomials."""
    return 128 if x.dtype == np.float32 else 512


def _hermite_h(x: Any, n: Any) -> Any:
    n = _degree(n)
    limit = _hermite_limit(x)
    steps = _recurrence(x, n, x + x, lambda j, x, p, q: (x + x) * q - (j + j) * p,
                        n <= limit, False)
    return _by_degree(n, 1.0, x + x, jnp.where(n > limit, np.nan, steps))


def _hermite_he(x: Any, n: Any) -> Any:
    n = _degree(n)
    limit = _hermite_limit(x)
    steps = _recurrence(x, n, x, lambda j, x, p, q: x * q - j * p, n <= limit, False)
    return _by_degree(n, 1.0, x, jnp.where(n > limit, np.nan, steps))


def _laguerre_l(x: Any, n: Any) -> Any:
    n = _degree(n)
    steps = _recurrence(x, n, 1 - x,
                        lambda j, x, p, q: ((j + j + (1 - x)) * q - j * p) / (j + 1),
                        x != 0, True)
    value = _by_degree(n, 1.0, 1 - x, steps)
    return jnp.where(n < 0, 0.0, jnp.where(x == 0, 1.0, value))


def _legendre_p(x: Any, n: Any) -> Any:
    n = _degree(n)
    steps = _recurrence(x, n, x, lambda j, x, p, q: ((j + j + 1) * x * q - j * p) / (j + 1),
                        jnp.abs(x) != 1, True)
    value = _by_degree(n, 1.0, x, steps)
    return jnp.where(n < 0, 0.0, _at_plus_minus_one(x, 1.0, 1.0, -1.0, n, value))


_POLYNOMIALS = {
    "chebyshev_polynomial_t": _chebyshev_t,
    "chebyshev_polynomial_u": _chebyshev_u,
    "chebyshev_polynomial_v": _chebyshev_v,
    "chebyshev_polynomial_w": _chebyshev_w,
    "shifted_chebyshev_polynomial_t": _shifted(_chebyshev_t),
    "shifted_chebyshev_polynomial_u": _shifted(_chebyshev_u),
    "shifted_chebyshev_polynomial_v": _shifted(_chebyshev_v),
    "shifted_chebyshev_polynomial_w": _shifted(_chebyshev_w),
    "hermite_polynomial_h": _hermite_h,
    "hermite_polynomial_he": _hermite_he,
    "laguerre_polynomial_l": _laguerre_l,
    "legendre_polynomial_p": _legendre_p,
}
for _name, _fn in _POLYNOMIALS.items():
    _op = getattr(aten, "special_" + _name)
    lowers(_op.default, _op.x_scalar, _op.n_scalar)(elementwise(_fn, Kind.INT_TO_FLOAT))


# --- Bessel and Airy functions -----------------------------------------------------------

# ATen's approximations (Cephes'; public domain), their coefficients as ATen's, each
# approximation on its own range of x; the ranges are computed apart with x clamped into
# each (so no branch sees inputs it would make inf or NaN of) and joined by where.
# The coefficients, named as ATen's: Ai's AN / AD above 2.09 and AFN / AFD, AGN / AGD
# below -2.09; J's RP / RQ up to 5 and Hankel's P and Q (PP / PQ, QP / QQ) above, which Y
# shares, adding YP / YQ up to 5; K's Chebyshev series A up to 2 and B above.

_AIRY_AN = (
    0.346538101525629, 12.007595273964581, 76.27960536152345, 168.08922493463058,
    159.75639135016442, 70.53609068404442, 14.026469116338967, 1.0,
)
_AIRY_AD = (
    0.5675945326387702, 14.75625625848472, 84.51389701414746, 177.31808814540045,
    164.2346928715297, 71.47784008255756, 14.095913560783403, 1.0,
)
_AIRY_AFN = (
    -0.1316963234183318, -0.6264565444319123, -0.6931580360369335, -0.2797799815451191,
    -0.04919001326095003, -0.004062659235948854, -0.0001592764962392621, -2.776491081552329e-06,
    -1.6778769848911465e-08,
)
_AIRY_AFD = (
    13.356042070655324, 32.682503279522464, 26.736704094149957, 9.187074029072596,
    1.4752914677166642, 0.11568717379518804, 0.004402916416152112, 7.547203482874142e-05,
    4.5185009297058035e-07,
)
_AIRY_AGN = (
    0.01973399320916857, 0.39110302961568827, 1.0657989759959559, 0.9391692298166502,
    0.35146565610554764, 0.06338889196289255, 0.005858041130483885, 0.000282851600836737,
    6.98793669997261e-06, 8.117892395543892e-08, 3.415517847659236e-10,
)
_AIRY_AGD = (
    9.30892908077442, 19.835292871831214, 15.564662893286462, 5.476860694229755,
    0.9542936116189619, 0.08645808263523921, 0.004126565238242226, 0.00010125908511650914,
    1.1716673321441352e-06, 4.9183457006293e-09,
)
_J0_PP = (
    0.0007969367292973471, 0.08283523921074408, 1.239533716464143, 5.447250030587687,
    8.74716500199817, 5.303240382353949, 1.0,
)
_J0_PQ = (
    0.0009244088105588637, 0.08562884743544745, 1.2535274390105895, 5.470977403304171,
    8.761908832370695, 5.306052882353947, 1.0,
)
_J0_QP = (
    -0.011366383889846916, -1.2825271867050931, -19.553954425773597, -93.20601521237683,
    -177.68116798048806, -147.07750515495118, -51.41053267665993, -6.050143506007285,
)
_J0_QQ = (
    64.3178256118178, 856.4300259769806, 3882.4018360540163, 7240.467741956525, 5930.727011873169,
    2062.0933166032783, 242.0057402402914,
)
_J0_RP = (
    -4794432209.782018, 1956174919465.5657, -249248344360967.72, 9708622510473064.0,
)
_J0_RQ = (
    499.563147152651, 173785.4016763747, 48440965.83399621, 11185553704.535683, 2112775201154.892,
    310518229857422.56, 3.1812195594320496e+16, 1.7108629408104315e+18,
)
_J1_PP = (
    0.0007621256162081731, 0.07313970569409176, 1.1271960812968493, 5.112079511468076,
    8.424045901417724, 5.214515986823615, 1.0,
)
_J1_PQ = (
    0.0005713231280725487, 0.06884559087544954, 1.105142326340617, 5.073863861286015,
    8.399855543276042, 5.209828486823619, 1.0,
)
_J1_QP = (
    0.05108625947501766, 4.982138729512334, 75.82382841325453, 366.7796093601508,
    710.8563049989261, 597.4896124006136, 211.68875710057213, 25.207020585802372,
)
_J1_QQ = (
    74.23732770356752, 1056.4488603826283, 4986.410583376536, 9562.318924047562,
    7997.041604473507, 2826.1927851763908, 336.0936078106983,
)
_J1_RP = (
    -899971225.7055594, 452228297998.19403, -72749424522181.83, 3682957328638529.0,
)
_J1_RQ = (
    620.8364781180543, 256987.25675774884, 83514679.14319493, 22151159547.97925,
    4749141220799.914, 784369607876235.9, 8.952223361846274e+16, 5.322786203326801e+18,
)
_Y0_YP = (
    15592.436785523574, -14663929.59039716, 5435264770.518765, -982136065717.9115,
    87590639439536.7, -3466283033847297.0, 4.4273326857256984e+16, -1.8495080043698668e+16,
)
_Y0_YQ = (
    1041.2835366425984, 626107.330137135, 268919633.39381415, 86400248710.3935,
    20297961275010.555, 3171577528429750.5, 2.5059625617265306e+17,
)
_Y1_YP = (
    1263204747.9017804, -647355876379.1603, 114509511541823.73, -8127702555013251.0,
    2.024394757135949e+17, -7.788771962659501e+17,
)
_Y1_YQ = (
    594.3015923461282, 235564.09294306856, 73481194.44597217, 18760131610.870617,
    3882312774962.3857, 620557727146953.8, 6.871410873553005e+16, 3.9727060811656064e+18,
)
_K0_A = (
    1.374465435613523e-16, 4.25981614279661e-14, 1.0349695257633842e-11, 1.904516377220209e-09,
    2.5347910790261494e-07, 2.286212103119452e-05, 0.001264615411446926, 0.0359799365153615,
    0.3442898999246285, -0.5353273932339028,
)
_K0_B = (
    5.300433772686263e-18, -1.6475804301524212e-17, 5.2103915050390274e-17,
    -1.678231096805412e-16, 5.512055978524319e-16, -1.848593377343779e-15, 6.3400764774050706e-15,
    -2.2275133269916698e-14, 8.032890775363575e-14, -2.9800969231727303e-13,
    1.140340588208475e-12, -4.514597883373944e-12, 1.8559491149547177e-11, -7.957489244477107e-11,
    3.577397281400301e-10, -1.69753450938906e-09, 8.574034017414225e-09, -4.660489897687948e-08,
    2.766813639445015e-07, -1.8317555227191195e-06, 1.39498137188765e-05, -0.00012849549581627802,
    0.0015698838857300533, -0.0314481013119645, 2.4403030820659555,
)
_K1_A = (
    -7.023863479386288e-18, -2.427449850519366e-15, -6.666901694199329e-13,
    -1.4114883926335278e-10, -2.213387630734726e-08, -2.4334061415659684e-06,
    -0.0001730288957513052, -0.006975723859639864, -0.12261118082265715, -0.3531559607765449,
    1.5253002273389478,
)
_K1_B = (
    -5.756744483665017e-18, 1.7940508731475592e-17, -5.689462558442859e-17, 1.838093544366639e-16,
    -6.057047248373319e-16, 2.038703165624334e-15, -7.019837090418314e-15, 2.4771544244813043e-14,
    -8.976705182324994e-14, 3.3484196660784293e-13, -1.2891739609510289e-12, 5.13963967348173e-12,
    -2.1299678384275683e-11, 9.218315187605006e-11, -4.1903547593418965e-10,
    2.015049755197033e-09, -1.0345762465678097e-08, 5.7410841254500495e-08,
    -3.5019606030878126e-07, 2.406484947837217e-06, -1.936197974166083e-05,
    0.00019521551847135162, -0.002857816859622779, 0.10392373657681724, 2.7206261904844427,
)

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _horner(coefficients: tuple[float, ...], z: Any) -> Any:
    """The polynomial of ``coefficients``, highest degree first, at ``z``."""
    total = jnp.zeros_like(z)
    for c in coefficients:
        total = total * z + c
    return total


def _chebyshev_series(coefficients: tuple[float, ...], y: Any) -> Any:
    """Cephes' ``chbevl``: the Chebyshev series of ``coefficients`` (highest first) at
    ``y / 2`` by Clenshaw's recurrence."""
    b0, b1, b2 = jnp.full_like(y, coefficients[0]), jnp.zeros_like(y), jnp.zeros_like(y)
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _hankel_asymptotic(x: Any, w: Any, p: tuple[tuple[float, ...], ...], phase: float,
                       second_kind: bool) -> Any:
    """J or Y of order 0 or 1 for ``x >= 5`` by the rational approximations ``P / Q`` of
    Hankel's expansion in ``w`` (``(5 / x)^2``): ``sqrt(2 / (pi x))`` times
    ``P cos(x - phase) - 5/x Q sin(x - phase)`` (J), ``P sin + 5/x Q cos`` (Y)."""
    pp, pq, qp, qq = p
    big_p = _horner(pp, w) / _horner(pq, w)
    big_q = 5.0 / x * (_horner(qp, w) / _horner(qq, w))
    shifted = x - phase
    if second_kind:
        wave = big_p * jnp.sin(shifted) + big_q * jnp.cos(shifted)
    else:
        wave = big_p * jnp.cos(shifted) - big_q * jnp.sin(shifted)
    return wave * _SQRT_2_OVER_PI / jnp.sqrt(x)


_J0_HANKEL = (_J0_PP, _J0_PQ, _J0_QP, _J0_QQ)
_J1_HANKEL = (_J1_PP, _J1_PQ, _J1_QP, _J1_QQ)
_J0_ZEROS_SQUARED = (5.78318596294678452118, 30.4712623436620863991)
_J1_ZEROS_SQUARED = (14.6819706421238932572, 49.2184563216946036703)


def _bessel_j0_of_abs(ax: Any) -> Any:
    """J0 of ``ax >= 0`` (or NaN)."""
    small = jnp.minimum(ax, 5.0)
    z = small * small
    first, second = _J0_ZEROS_SQUARED
    near = (z - first) * (z - second) * _horner(_J0_RP, z) / _horner(_J0_RQ, z)
    near = jnp.where(small < 1e-5, 1.0 - z / 4.0, near)
    large = jnp.maximum(ax, 5.0)
    far = _hankel_asymptotic(large, 25.0 / (large * large), _J0_HANKEL, math.pi / 4, False)
    return jnp.where(ax <= 5.0, near, far)


def _bessel_j0(x: Any) -> Any:
    return _bessel_j0_of_abs(jnp.abs(x))


def _bessel_j1_of_abs(ax: Any) -> Any:
    """J1 of ``ax >= 0`` (or NaN)."""
    small = jnp.minimum(ax, 5.0)
    z = small * small
    first, second = _J1_ZEROS_SQUARED
    near = _horner(_J1_RP, z) / _horner(_J1_RQ, z) * small * (z - first) * (z - second)
    large = jnp.maximum(ax, 5.0)
    w = 5.0 / large * (5.0 / large)
    far = _hankel_asymptotic(large, w, _J1_HANKEL, 3 * math.pi / 4, False)
    return jnp.where(ax <= 5.0, near, far)


def _bessel_j1(x: Any) -> Any:
    """J1, odd."""
    value = _bessel_j1_of_abs(jnp.abs(x))
    return jnp.where(x < 0, -value, value)


def _second_kind(x: Any, near: Callable[[Any], Any], far: Callable[[Any], Any]) -> Any:
    """Y0 or Y1: ``near`` on (0, 5], ``far`` above; -inf at 0 and NaN below, as ATen."""
    small = jnp.clip(x, jnp.finfo(x.dtype).tiny, 5.0)
    value = jnp.where(x <= 5.0, near(small), far(jnp.maximum(x, 5.0)))
    return jnp.where(x == 0, -np.inf, jnp.where(x < 0, np.nan, value))


def _bessel_y0(x: Any) -> Any:
    def near(s: Any) -> Any:
        z = s * s
        return (_horner(_Y0_YP, z) / _horner(_Y0_YQ, z)
                + 2 / math.pi * jnp.log(s) * _bessel_j0_of_abs(s))

    def far(large: Any) -> Any:
        return _hankel_asymptotic(large, 25.0 / (large * large), _J0_HANKEL, math.pi / 4,
                                  True)

    return _second_kind(x, near, far)


def _bessel_y1(x: Any) -> Any:
    def near(s: Any) -> Any:
        z = s * s
        return (s * (_horner(_Y1_YP, z) / _horner(_Y1_YQ, z))
                + 2 / math.pi * (_bessel_j1_of_abs(s) * jnp.log(s) - 1.0 / s))

    def far(large: Any) -> Any:
        w = 5.0 / large * (5.0 / large)
        return _hankel_asymptotic(large, w, _J1_HANKEL, 3 * math.pi / 4, True)

    return _second_kind(x, near, far)


def _modified_k(x: Any, order: int, scaled: bool) -> Any:
    """K0 or K1 (``scaled``: times ``exp(x)``): ``log(x / 2) I(x)`` plus a Chebyshev
    series up to 2, ``exp(-x) / sqrt(x)`` times another above; inf at 0, NaN below."""
    near_coefficients, far_coefficients = (_K0_A, _K0_B) if order == 0 else (_K1_A, _K1_B)
    small = jnp.clip(x, jnp.finfo(x.dtype).tiny, 2.0)
    series = _chebyshev_series(near_coefficients, small * small - 2.0)
    if order == 0:
        near = series - jnp.log(0.5 * small) * jsp.i0(small)
    else:
        near = jnp.log(0.5 * small) * jsp.i1(small) + series / small
    large = jnp.maximum(x, 2.0)
    far = _chebyshev_series(far_coefficients, 8.0 / large - 2.0) / jnp.sqrt(large)
    if scaled:
        near = near * jnp.exp(small)
    else:
        far = far * jnp.exp(-large)
    value = jnp.where(x <= 2.0, near, far)
    return jnp.where(x == 0, np.inf, jnp.where(x < 0, np.nan, value))


# Ai's range of its power series, and the x above which it underflows
_AIRY_SERIES_END = 2.09
_AIRY_ZERO = 103.892
_AIRY_SERIES_TERMS = 15  # the 15th term is below 1e-30 of the sum at |x| = 2.09


def _airy_ai_oscillating(x: Any) -> Any:
    """Ai for ``x <= -2.09``: the asymptotic form in ``zeta = 2/3 (-x)^(3/2)``."""
    zeta = -2.0 * x * jnp.sqrt(-x) / 3.0
    z = 1.0 / zeta
    z2 = z * z
    f = 1.0 + z2 * _horner(_AIRY_AFN, z2) / _horner(_AIRY_AFD, z2)
    g = z * _horner(_AIRY_AGN, z2) / _horner(_AIRY_AGD, z2)
    t = zeta + 0.25 * math.pi
    return _INV_SQRT_PI / jnp.sqrt(jnp.sqrt(-x)) * (jnp.sin(t) * f - jnp.cos(t) * g)


def _airy_ai_decaying(x: Any) -> Any:
    """Ai for ``x >= 2.09``: ``exp(-zeta)`` times a rational function of ``1 / zeta``."""
    zeta = 2.0 * x * jnp.sqrt(x) / 3.0
    ratio = _horner(_AIRY_AN, 1.0 / zeta) / _horner(_AIRY_AD, 1.0 / zeta)
    return _INV_SQRT_PI * ratio / (2.0 * jnp.sqrt(jnp.sqrt(x)) * jnp.exp(zeta))


def _airy_ai_series(x: Any) -> Any:
    """Ai for ``|x| < 2.09``: ``c1 f(x) - c2 g(x)``, the Maclaurin series of the Airy
    equation's two solutions (ATen sums until a term is below epsilon; a fixed count
    reaches that everywhere on this range)."""
    z = x * x * x
    f, g = jnp.ones_like(x), x
    m, n = jnp.ones_like(x), x
    k = 1.0
    for _ in range(_AIRY_SERIES_TERMS):
        m = m * z / (k + 1) / (k + 2)
        n = n * z / (k + 2) / (k + 3)
        f, g = f + m, g + n
        k += 3
    return 0.355028053887817239260 * f - 0.258819403792806798405 * g


def _airy_ai(x: Any) -> Any:
    """The Airy function Ai: NaN at +-inf and 0 above 103.892, as ATen."""
    end = _AIRY_SERIES_END
    oscillating = _airy_ai_oscillating(jnp.minimum(x, -end))
    decaying = _airy_ai_decaying(jnp.clip(x, end, _AIRY_ZERO))
    series = _airy_ai_series(jnp.clip(x, -end, end))
    value = jnp.where(x < -end, oscillating, jnp.where(x >= end, decaying, series))
    value = jnp.where(x > _AIRY_ZERO, 0.0, value)
    return jnp.where(jnp.isinf(x), np.nan, value)


register_elementwise({
    (aten.special_bessel_j0.default,): _bessel_j0,
    (aten.special_bessel_j1.default,): _bessel_j1,
    (aten.special_bessel_y0.default,): _bessel_y0,
    (aten.special_bessel_y1.default,): _bessel_y1,
    (aten.special_modified_bessel_k0.default,): lambda x: _modified_k(x, 0, False),
    (aten.special_modified_bessel_k1.default,): lambda x: _modified_k(x, 1, False),
    (aten.special_scaled_modified_bessel_k0.default,): lambda x: _modified_k(x, 0, True),
    (aten.special_scaled_modified_bessel_k1.default,): lambda x: _modified_k(x, 1, True),
    (aten.special_airy_ai.default,): _airy_ai,
}, Kind.INT_TO_FLOAT)
