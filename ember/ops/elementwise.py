"""Elementwise primitives: math, comparisons, integer and bitwise ops, select, casts.

At this (lax) level operands must already agree in shape and dtype; ``ember.numpy``
broadcasts and promotes before binding. Each primitive is a row in a table: its name,
NumPy reference, which dtypes it accepts and its derivative.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import rules

__all__ = [
    "neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log", "log1p",
    "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf", "erfc", "erf_inv",
    "lgamma", "digamma", "abs", "bitwise_not", "real", "imag", "conj", "integer_pow",
    "population_count", "square", "add", "sub", "mul", "div", "rem", "pow", "max", "min",
    "atan2", "nextafter", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "eq", "ne", "lt", "le", "gt", "ge",
    "select_n", "clamp", "convert_element_type", "ELEMENTWISE",
]

# Every elementwise primitive, by name: fusion and renderers look kernels up here.
ELEMENTWISE: dict[str, Primitive] = {}

# dtype classes a primitive accepts
FLOAT = "float"      # real floating
INEXACT = "inexact"  # real or complex floating
NUMBER = "number"    # ints, floats, complex (not bool)
INT = "int"          # integers
INT_BOOL = "intbool" # integers or bool
ANY = "any"


def _accepts(kind: str, dtype: np.dtype) -> bool:
    if kind == ANY:
        return True
    if kind == FLOAT:
        return dtypes.is_floating(dtype)
    if kind == INEXACT:
        return dtypes.is_inexact(dtype)
    if kind == NUMBER:
        return not dtypes.is_bool(dtype)
    if kind == INT:
        return dtypes.is_integer(dtype)
    return dtypes.is_integer(dtype) or dtypes.is_bool(dtype)


def _check_same(name: str, avals: tuple[ShapedArray, ...]) -> None:
    first = avals[0]
    for other in avals[1:]:
        if other.shape != first.shape:
            raise EmberValueError(
                f"{name}: operand shapes {first.shape} and {other.shape} differ; lax-level "
                "operations need equal shapes (ember.numpy broadcasts for you)")
        if other.dtype != first.dtype:
            raise EmberTypeError(
                f"{name}: operand dtypes {first.dtype} and {other.dtype} differ; convert one "
                "with .astype(...) (ember.numpy promotes for you)")


def _elementwise(name: str, numpy_fn: Callable, kind: str, nargs: int,
                 out_dtype: Callable[[np.dtype], np.dtype] | None = None) -> Primitive:
    prim = Primitive(name)
    ELEMENTWISE[name] = prim

    @prim.def_abstract_eval
    def _abstract(*avals: ShapedArray, **params: Any) -> ShapedArray:
        if len(avals) != nargs:
            raise EmberTypeError(f"{name} takes {nargs} operands, got {len(avals)}")
        _check_same(name, avals)
        dtype = avals[0].dtype
        if not _accepts(kind, dtype):
            raise EmberTypeError(f"{name} does not accept dtype {dtype} (needs {kind} dtypes)")
        return ShapedArray(avals[0].shape, out_dtype(dtype) if out_dtype else dtype)

    @prim.def_impl
    def _impl(*args: np.ndarray, **params: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = numpy_fn(*args, **params)
        dtype = out_dtype(np.asarray(args[0]).dtype) if out_dtype else np.asarray(args[0]).dtype
        return np.asarray(out, dtype=dtype)

    rules.def_elementwise_batch(prim)
    return prim


def _to_bool(_: np.dtype) -> np.dtype:
    return dtypes.bool_


def _real_of(dtype: np.dtype) -> np.dtype:
    return {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(dtype, dtype)


# --- reference implementations NumPy lacks --------------------------------------------

def _vectorize_math(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    vectorized = np.vectorize(fn, otypes=[np.float64])

    def apply(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return vectorized(x.astype(np.float64)).astype(x.dtype) if x.size else x.copy()

    return apply


def _special(name: str, fallback: Callable[[float], float]) -> Callable:
    """``scipy.special.<name>`` when SciPy is installed (faster and exact), else the
    vectorized scalar ``fallback``. SciPy is imported on the first call, not at import
    time: importing ``scipy.special`` costs ~0.2 s of every process's start-up."""
    resolved: list[Callable] = []

    def resolve() -> Callable:
        try:
            import scipy.special as special  # optional: faster and exact
        except ImportError:
            return _vectorize_math(fallback)
        fn = getattr(special, name)
        return lambda x: fn(np.asarray(x, dtype=np.float64)).astype(np.asarray(x).dtype)

    def apply(x):
        if not resolved:
            resolved.append(resolve())
        return resolved[0](x)

    return apply


def _digamma_scalar(x: float) -> float:
    if math.isnan(x) or x == -math.inf:
        return math.nan
    if x <= 0 and x == math.floor(x):
        return math.nan
    result = 0.0
    if x < 0:  # reflection
        return _digamma_scalar(1 - x) - math.pi / math.tan(math.pi * x)
    while x < 6:
        result -= 1 / x
        x += 1
    f = 1 / (x * x)
    return result + math.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (
        1 / 240 - f / 132))))


def _erf_inv_scalar(y: float) -> float:
    if math.isnan(y) or y < -1 or y > 1:
        return math.nan
    if y == 1:
        return math.inf
    if y == -1:
        return -math.inf
    # Initial guess (Giles' approximation), then Newton steps on erf.
    w = -math.log((1.0 - y) * (1.0 + y))
    x = math.copysign(math.sqrt(w), y) * 0.88 if w > 5 else y * 1.2
    for _ in range(60):
        err = math.erf(x) - y
        step = err / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        x -= step
        if math.fabs(step) <= 4e-16 * (1.0 if math.fabs(x) < 1.0 else math.fabs(x)):  # converged
            break
    return x


_erf = _special("erf", math.erf)
_erfc = _special("erfc", math.erfc)
_erfinv = _special("erfinv", _erf_inv_scalar)
_lgamma = _special("gammaln", math.lgamma)
_digamma = _special("digamma", _digamma_scalar)


def _round_half_away(x: np.ndarray, rounding_method: int = 0) -> np.ndarray:
    if rounding_method == 1:  # to nearest even, as np.round
        return np.round(x)
    return np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))


def _logistic(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    positive = x >= 0
    out[positive] = 1 / (1 + np.exp(-x[positive]))
    ex = np.exp(x[~positive])
    out[~positive] = ex / (1 + ex)
    return out


def _c_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Division as C and XLA define it: integers round toward zero."""
    x, y = np.asarray(x), np.asarray(y)
    if dtypes.is_integer(x.dtype):
        safe = np.where(y == 0, 1, y)
        floored = x // safe  # (np.abs would overflow on the most negative integer)
        inexact = (floored * safe != x) & ((x < 0) != (safe < 0))
        quotient = floored + inexact.astype(x.dtype)
        return np.where(y == 0, -1 if dtypes.is_signed(x.dtype) else np.iinfo(x.dtype).max,
                        quotient).astype(x.dtype)
    return np.true_divide(x, y)


def _c_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Remainder with the sign of the dividend (C fmod semantics, as XLA)."""
    x, y = np.asarray(x), np.asarray(y)
    if dtypes.is_integer(x.dtype):
        safe = np.where(y == 0, 1, y)
        return np.where(y == 0, x, x - _c_div(x, safe) * safe).astype(x.dtype)
    return np.fmod(x, y)


def _shift_left(x, y):
    bits = x.dtype.itemsize * 8
    y_safe = np.where((y < 0) | (y >= bits), 0, y).astype(x.dtype)
    return np.where((y < 0) | (y >= bits), 0, np.left_shift(x, y_safe)).astype(x.dtype)


def _shift_right_logical(x, y):
    bits = x.dtype.itemsize * 8
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    ux = x.view(unsigned) if isinstance(x, np.ndarray) else np.asarray(x).view(unsigned)
    y_safe = np.where((y < 0) | (y >= bits), 0, y).astype(unsigned)
    out = np.where((y < 0) | (y >= bits), 0, np.right_shift(ux, y_safe)).astype(unsigned)
    return out.view(x.dtype)


def _shift_right_arithmetic(x, y):
    bits = x.dtype.itemsize * 8
    y_clamped = np.clip(y, 0, bits - 1).astype(x.dtype)
    out = np.right_shift(x, y_clamped)
    if dtypes.is_unsigned(x.dtype):
        out = np.where(y >= bits, 0, out)
    return out.astype(x.dtype)


def _population_count(x):
    x = np.asarray(x)
    unsigned = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    count = np.zeros(x.shape, dtype=np.uint64)
    for _ in range(x.dtype.itemsize * 8):
        count += unsigned & np.uint64(1)
        unsigned >>= np.uint64(1)
    return count.astype(x.dtype)


def _nextafter(x, y):
    return np.nextafter(x, y)


def _integer_pow(x, y: int):
    if y == 0:
        return np.ones_like(x)
    if y < 0:
        return np.asarray(1, x.dtype) / np.power(x, -y)
    return np.power(x, y)


def _pow(x, y):
    if dtypes.is_integer(np.asarray(x).dtype):
        y = np.asarray(y)
        return np.where(y < 0, 0, np.power(x, np.maximum(y, 0))).astype(np.asarray(x).dtype)
    return np.power(x, y)


# --- the table ------------------------------------------------------------------------

neg_p = _elementwise("neg", np.negative, NUMBER, 1)
sign_p = _elementwise("sign", np.sign, NUMBER, 1)
floor_p = _elementwise("floor", np.floor, FLOAT, 1)
ceil_p = _elementwise("ceil", np.ceil, FLOAT, 1)
round_p = _elementwise("round", _round_half_away, FLOAT, 1)
is_finite_p = _elementwise("is_finite", np.isfinite, FLOAT, 1, _to_bool)
exp_p = _elementwise("exp", np.exp, INEXACT, 1)
exp2_p = _elementwise("exp2", np.exp2, INEXACT, 1)
log_p = _elementwise("log", np.log, INEXACT, 1)
log1p_p = _elementwise("log1p", np.log1p, INEXACT, 1)
expm1_p = _elementwise("expm1", np.expm1, INEXACT, 1)
tanh_p = _elementwise("tanh", np.tanh, INEXACT, 1)
logistic_p = _elementwise("logistic", _logistic, FLOAT, 1)
sin_p = _elementwise("sin", np.sin, INEXACT, 1)
cos_p = _elementwise("cos", np.cos, INEXACT, 1)
tan_p = _elementwise("tan", np.tan, INEXACT, 1)
asin_p = _elementwise("asin", np.arcsin, INEXACT, 1)
acos_p = _elementwise("acos", np.arccos, INEXACT, 1)
atan_p = _elementwise("atan", np.arctan, INEXACT, 1)
sinh_p = _elementwise("sinh", np.sinh, INEXACT, 1)
cosh_p = _elementwise("cosh", np.cosh, INEXACT, 1)
asinh_p = _elementwise("asinh", np.arcsinh, INEXACT, 1)
acosh_p = _elementwise("acosh", np.arccosh, INEXACT, 1)
atanh_p = _elementwise("atanh", np.arctanh, INEXACT, 1)
sqrt_p = _elementwise("sqrt", np.sqrt, INEXACT, 1)
rsqrt_p = _elementwise("rsqrt", lambda x: 1 / np.sqrt(x), INEXACT, 1)
cbrt_p = _elementwise("cbrt", np.cbrt, FLOAT, 1)
erf_p = _elementwise("erf", _erf, FLOAT, 1)
erfc_p = _elementwise("erfc", _erfc, FLOAT, 1)
erf_inv_p = _elementwise("erf_inv", _erfinv, FLOAT, 1)
lgamma_p = _elementwise("lgamma", _lgamma, FLOAT, 1)
digamma_p = _elementwise("digamma", _digamma, FLOAT, 1)
abs_p = _elementwise("abs", np.abs, NUMBER, 1, _real_of)
not_p = _elementwise("not", np.invert, INT_BOOL, 1)
real_p = _elementwise("real", np.real, INEXACT, 1, _real_of)
imag_p = _elementwise("imag", np.imag, INEXACT, 1, _real_of)
conj_p = _elementwise("conj", np.conj, INEXACT, 1)
integer_pow_p = _elementwise("integer_pow", _integer_pow, NUMBER, 1)
population_count_p = _elementwise("population_count", _population_count, INT, 1)
square_p = _elementwise("square", np.square, NUMBER, 1)

add_p = _elementwise("add", np.add, NUMBER, 2)
sub_p = _elementwise("sub", np.subtract, NUMBER, 2)
mul_p = _elementwise("mul", np.multiply, NUMBER, 2)
div_p = _elementwise("div", _c_div, NUMBER, 2)
rem_p = _elementwise("rem", _c_rem, NUMBER, 2)
pow_p = _elementwise("pow", _pow, NUMBER, 2)
max_p = _elementwise("max", np.maximum, ANY, 2)
min_p = _elementwise("min", np.minimum, ANY, 2)
atan2_p = _elementwise("atan2", np.arctan2, FLOAT, 2)
nextafter_p = _elementwise("nextafter", _nextafter, FLOAT, 2)
and_p = _elementwise("and", np.bitwise_and, INT_BOOL, 2)
or_p = _elementwise("or", np.bitwise_or, INT_BOOL, 2)
xor_p = _elementwise("xor", np.bitwise_xor, INT_BOOL, 2)
shift_left_p = _elementwise("shift_left", _shift_left, INT, 2)
shift_right_logical_p = _elementwise("shift_right_logical", _shift_right_logical, INT, 2)
shift_right_arithmetic_p = _elementwise("shift_right_arithmetic", _shift_right_arithmetic, INT, 2)
eq_p = _elementwise("eq", np.equal, ANY, 2, _to_bool)
ne_p = _elementwise("ne", np.not_equal, ANY, 2, _to_bool)
lt_p = _elementwise("lt", np.less, ANY, 2, _to_bool)
le_p = _elementwise("le", np.less_equal, ANY, 2, _to_bool)
gt_p = _elementwise("gt", np.greater, ANY, 2, _to_bool)
ge_p = _elementwise("ge", np.greater_equal, ANY, 2, _to_bool)


# select_n(which, *cases): which is bool (2 cases) or int32 (any number of cases).
select_n_p = Primitive("select_n")
ELEMENTWISE["select_n"] = select_n_p


@select_n_p.def_abstract_eval
def _select_n_abstract(which: ShapedArray, *cases: ShapedArray) -> ShapedArray:
    if not cases:
        raise EmberTypeError("select_n needs at least one case")
    _check_same("select_n", cases)
    if which.shape != cases[0].shape and which.shape != ():
        raise EmberValueError(f"select_n: predicate shape {which.shape} differs from case "
                              f"shape {cases[0].shape}")
    if dtypes.is_bool(which.dtype):
        if len(cases) > 2:
            raise EmberTypeError("select_n with a bool predicate takes at most 2 cases")
    elif not dtypes.is_integer(which.dtype):
        raise EmberTypeError(f"select_n predicate must be bool or integer, got {which.dtype}")
    return cases[0]


@select_n_p.def_impl
def _select_n_impl(which: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    which = np.asarray(which)
    if which.dtype == np.bool_:
        which = which.astype(np.int32)
    shape = np.broadcast(which, cases[0]).shape
    return np.choose(np.clip(np.broadcast_to(which, shape), 0, len(cases) - 1),
                     [np.broadcast_to(c, shape) for c in cases])


rules.def_elementwise_batch(select_n_p)

clamp_p = Primitive("clamp")  # clamp(lo, x, hi)
ELEMENTWISE["clamp"] = clamp_p


@clamp_p.def_abstract_eval
def _clamp_abstract(lo: ShapedArray, x: ShapedArray, hi: ShapedArray) -> ShapedArray:
    for bound in (lo, hi):
        if bound.dtype != x.dtype:
            raise EmberTypeError(f"clamp: bound dtype {bound.dtype} differs from {x.dtype}")
        if bound.shape not in ((), x.shape):
            raise EmberValueError(f"clamp: bound shape {bound.shape} must be () or {x.shape}")
    return x


@clamp_p.def_impl
def _clamp_impl(lo, x, hi):
    return np.minimum(np.maximum(x, lo), hi).astype(np.asarray(x).dtype)


rules.def_elementwise_batch(clamp_p)

convert_element_type_p = Primitive("convert_element_type")
ELEMENTWISE["convert_element_type"] = convert_element_type_p


@convert_element_type_p.def_abstract_eval
def _convert_abstract(x: ShapedArray, *, new_dtype: np.dtype) -> ShapedArray:
    return ShapedArray(x.shape, new_dtype)


@convert_element_type_p.def_impl
def _convert_impl(x: np.ndarray, *, new_dtype: np.dtype) -> np.ndarray:
    x = np.asarray(x)
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = x.real
    if dtypes.is_inexact(x.dtype) and dtypes.is_integer(new_dtype):
        # Out-of-range and NaN conversions are undefined in C; define them as XLA does
        # on CPU: NaN -> 0, saturate to the integer range.
        info = np.iinfo(new_dtype)
        with np.errstate(invalid="ignore"):
            x = np.where(np.isnan(x), 0, np.clip(np.trunc(x), info.min, info.max))
        with np.errstate(all="ignore"):
            # info.max may round up in x's float type (2**31 in float32): saturate it too.
            return np.where(x >= info.max, info.max, x.astype(new_dtype)).astype(new_dtype)
    with np.errstate(all="ignore"):
        return x.astype(new_dtype)


rules.def_elementwise_batch(convert_element_type_p)


# --- lax-level functions (what ember.lax exports) --------------------------------------

def _unary(prim: Primitive) -> Callable:
    def fn(x):
        return prim.bind(x)

    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}`` (lax level: no broadcasting or promotion)."
    return fn


def _binary(prim: Primitive) -> Callable:
    def fn(x, y):
        x, y = _match_scalars(x, y)
        return prim.bind(x, y)

    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}``; operands must have equal shapes and dtypes."
    return fn


def _match_scalars(x: Any, y: Any) -> tuple[Any, Any]:
    """Let Python scalars take the other operand's dtype (weak typing, as in JAX)."""
    if dtypes.is_weak_scalar(x) and not dtypes.is_weak_scalar(y):
        x = _full_like_scalar(x, y)
    elif dtypes.is_weak_scalar(y) and not dtypes.is_weak_scalar(x):
        y = _full_like_scalar(y, x)
    return x, y


def _full_like_scalar(scalar: Any, like: Any) -> Any:
    from ember.ops.structural import broadcast_in_dim

    aval = like.aval if hasattr(like, "aval") else ShapedArray(np.shape(like),
                                                               np.asarray(like).dtype)
    value = np.asarray(scalar, dtype=aval.dtype)
    return value if aval.shape == () else broadcast_in_dim(value, aval.shape, ())


neg, sign, floor, ceil, is_finite = map(_unary, (neg_p, sign_p, floor_p, ceil_p, is_finite_p))
exp, exp2, log, log1p, expm1 = map(_unary, (exp_p, exp2_p, log_p, log1p_p, expm1_p))
tanh, logistic, sin, cos, tan = map(_unary, (tanh_p, logistic_p, sin_p, cos_p, tan_p))
asin, acos, atan, sinh, cosh = map(_unary, (asin_p, acos_p, atan_p, sinh_p, cosh_p))
asinh, acosh, atanh, sqrt, rsqrt = map(_unary, (asinh_p, acosh_p, atanh_p, sqrt_p, rsqrt_p))
cbrt, erf, erfc, erf_inv, lgamma = map(_unary, (cbrt_p, erf_p, erfc_p, erf_inv_p, lgamma_p))
digamma, abs, bitwise_not, real, imag = map(_unary, (digamma_p, abs_p, not_p, real_p, imag_p))
conj, population_count, square = map(_unary, (conj_p, population_count_p, square_p))

add, sub, mul, div, rem = map(_binary, (add_p, sub_p, mul_p, div_p, rem_p))
pow, max, min, atan2, nextafter = map(_binary, (pow_p, max_p, min_p, atan2_p, nextafter_p))
bitwise_and, bitwise_or, bitwise_xor = map(_binary, (and_p, or_p, xor_p))
shift_left, shift_right_logical = map(_binary, (shift_left_p, shift_right_logical_p))
shift_right_arithmetic = _binary(shift_right_arithmetic_p)
eq, ne, lt, le, gt, ge = map(_binary, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))


def round(x, rounding_method: int = 0):
    """Round to integral values: 0 = half away from zero (default), 1 = half to even."""
    return round_p.bind(x, rounding_method=int(rounding_method))


def integer_pow(x, y: int):
    return integer_pow_p.bind(x, y=int(y))


def select_n(which, *cases):
    return select_n_p.bind(which, *cases)


def clamp(lo, x, hi):
    lo, x = _match_scalars(lo, x)
    hi, x = _match_scalars(hi, x)
    return clamp_p.bind(lo, x, hi)


def convert_element_type(x, new_dtype):
    new_dtype = dtypes.canonicalize(new_dtype)
    if getattr(x, "dtype", None) == new_dtype:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype)


# --- derivatives: one row per primitive (jvp; transpose where linear) ------------------
#
# defjvp rows give, per operand, the tangent contribution d(out) = f(t, *operands);
# defjvp2 rows also see the output ``ans``. Rule makers live in ember.ops.rules.

def _zeros_like(x):
    return rules.zeros_like_aval(ShapedArray(np.shape(x), x.dtype))


def _where(pred, on_true, on_false):
    return select_n(pred, on_false, on_true)


def _bcast_to(t, like):
    """A scalar clamp bound's tangent, broadcast to the operand's shape."""
    from ember.ops.structural import broadcast_in_dim

    return broadcast_in_dim(t, np.shape(like), ()) if np.shape(t) != np.shape(like) else t


_PIECEWISE_CONSTANT = (sign_p, floor_p, ceil_p, round_p, is_finite_p, not_p,
                       population_count_p, nextafter_p, and_p, or_p, xor_p, shift_left_p,
                       shift_right_logical_p, shift_right_arithmetic_p, eq_p, ne_p, lt_p,
                       le_p, gt_p, ge_p)
for _prim in _PIECEWISE_CONSTANT:
    rules.defjvp_zero(_prim)

rules.defjvp2(exp_p, lambda t, ans, x: mul(t, ans))
rules.defjvp2(exp2_p, lambda t, ans, x: mul(t, mul(ans, math.log(2.0))))
rules.defjvp(log_p, lambda t, x: div(t, x))
rules.defjvp(log1p_p, lambda t, x: div(t, add(x, 1.0)))
rules.defjvp2(expm1_p, lambda t, ans, x: mul(t, add(ans, 1.0)))
rules.defjvp2(tanh_p, lambda t, ans, x: mul(t, sub(1.0, square(ans))))
rules.defjvp2(logistic_p, lambda t, ans, x: mul(t, mul(ans, sub(1.0, ans))))
rules.defjvp(sin_p, lambda t, x: mul(t, cos(x)))
rules.defjvp(cos_p, lambda t, x: neg(mul(t, sin(x))))
rules.defjvp2(tan_p, lambda t, ans, x: mul(t, add(1.0, square(ans))))
rules.defjvp(asin_p, lambda t, x: mul(t, rsqrt(sub(1.0, square(x)))))
rules.defjvp(acos_p, lambda t, x: neg(mul(t, rsqrt(sub(1.0, square(x))))))
rules.defjvp(atan_p, lambda t, x: div(t, add(1.0, square(x))))
rules.defjvp(sinh_p, lambda t, x: mul(t, cosh(x)))
rules.defjvp(cosh_p, lambda t, x: mul(t, sinh(x)))
rules.defjvp(asinh_p, lambda t, x: mul(t, rsqrt(add(square(x), 1.0))))
rules.defjvp(acosh_p, lambda t, x: mul(t, rsqrt(mul(sub(x, 1.0), add(x, 1.0)))))
rules.defjvp(atanh_p, lambda t, x: div(t, sub(1.0, square(x))))
rules.defjvp2(sqrt_p, lambda t, ans, x: div(mul(t, 0.5), ans))
rules.defjvp2(rsqrt_p, lambda t, ans, x: mul(t, div(mul(ans, -0.5), x)))
rules.defjvp2(cbrt_p, lambda t, ans, x: mul(t, div(integer_pow(ans, -2), 3.0)))
rules.defjvp(erf_p, lambda t, x: mul(t, mul(2.0 / math.sqrt(math.pi), exp(neg(square(x))))))
rules.defjvp(erfc_p, lambda t, x: mul(t, mul(-2.0 / math.sqrt(math.pi), exp(neg(square(x))))))
rules.defjvp2(erf_inv_p, lambda t, ans, x: mul(t, mul(math.sqrt(math.pi) / 2.0, exp(square(ans)))))
rules.defjvp(lgamma_p, lambda t, x: mul(t, digamma(x)))


def _trigamma_positive(x):
    """polygamma(1, x) for x > 0: six steps of the recurrence psi1(x) = psi1(x+1) + 1/x^2,
    then the asymptotic series at x + 6 (error below 1e-9)."""
    total = _zeros_like(x)
    for k in range(6):
        total = add(total, integer_pow(add(x, float(k)), -2))
    z = add(x, 6.0)
    inv = div(add(_zeros_like(z), 1.0), z)
    inv2 = square(inv)
    series = mul(inv2, sub(1.0 / 6.0, mul(inv2, sub(1.0 / 30.0, mul(inv2, sub(
        1.0 / 42.0, mul(inv2, 1.0 / 30.0)))))))
    return add(total, mul(inv, add(add(series, mul(inv, 0.5)), 1.0)))


def _trigamma(x):
    """polygamma(1, x), with the reflection formula for x < 0.5. Each branch gets inputs
    where it is finite, so the unused one puts no NaN into derivatives."""
    small = lt(x, 0.5)
    x_small = _where(small, x, add(_zeros_like(x), 0.25))
    x_large = _where(small, add(_zeros_like(x), 1.0), x)
    reflected = sub(div(add(_zeros_like(x), math.pi ** 2), square(sin(mul(x_small, math.pi)))),
                    _trigamma_positive(sub(1.0, x_small)))
    return _where(small, reflected, _trigamma_positive(x_large))


rules.defjvp(digamma_p, lambda t, x: mul(t, _trigamma(x)))
rules.defjvp(square_p, lambda t, x: mul(t, mul(x, 2.0)))


def _abs_jvp(t, x):
    if dtypes.is_complex(x.dtype):  # d|z| = Re(conj(z) dz) / |z|
        return div(real(mul(conj(x), t)), abs(x))
    return mul(t, sign(x))


rules.defjvp(abs_p, _abs_jvp)


def _integer_pow_jvp(t, x, *, y):
    if y == 0:
        return _zeros_like(x)
    return mul(t, mul(integer_pow(x, y - 1), float(y)))


rules.defjvp(integer_pow_p, _integer_pow_jvp)


def _pow_jvp_base(t, x, y):
    # y * x**(y-1), defined as 0 where y == 0 (so x = 0, y = 0 gives no NaN)
    slope = mul(y, pow(x, sub(y, 1.0)))
    return mul(t, _where(eq(y, 0.0), _zeros_like(x), slope))


def _pow_jvp_exponent(t, ans, x, y):
    # log(x) * x**y, defined as 0 where x == 0
    safe_x = _where(eq(x, 0.0), add(_zeros_like(x), 1.0), x)
    return mul(t, _where(eq(x, 0.0), _zeros_like(x), mul(log(safe_x), ans)))


rules.defjvp2(pow_p, lambda t, ans, x, y: _pow_jvp_base(t, x, y), _pow_jvp_exponent)


def _balanced(x, y, pick):
    """1 where ``x`` is picked, 0.5 where x == y (max/min split the tangent)."""
    one = add(_zeros_like(x), 1.0)
    half = add(_zeros_like(x), 0.5)
    return _where(pick(x, y), one, _where(eq(x, y), half, _zeros_like(x)))


rules.defjvp(max_p, lambda t, x, y: mul(t, _balanced(x, y, gt)),
             lambda t, x, y: mul(t, _balanced(y, x, gt)))
rules.defjvp(min_p, lambda t, x, y: mul(t, _balanced(x, y, lt)),
             lambda t, x, y: mul(t, _balanced(y, x, lt)))
rules.defjvp(atan2_p, lambda t, x, y: mul(t, div(y, add(square(x), square(y)))),
             lambda t, x, y: mul(t, div(neg(x), add(square(x), square(y)))))
rules.defjvp(rem_p, lambda t, x, y: t,
             lambda t, x, y: mul(neg(t), mul(sign(div(x, y)), floor(abs(div(x, y))))))

# Linear primitives: jvp applies the op to the tangents; transpose sends cotangents back.
rules.defjvp(add_p, lambda t, x, y: t, lambda t, x, y: t)
rules.defjvp(sub_p, lambda t, x, y: t, lambda t, x, y: neg(t))
rules.defjvp(mul_p, lambda t, x, y: mul(t, y), lambda t, x, y: mul(x, t))
rules.defjvp(div_p, lambda t, x, y: div(t, y),
             lambda t, x, y: div(mul(neg(t), x), square(y)))


def _linear_in(x, ct):
    return ct if rules.is_undefined_primal(x) else None


def _mul_transpose(ct, x, y):
    if rules.is_undefined_primal(x) and rules.is_undefined_primal(y):
        raise EmberTypeError("mul of two linear values is not linear: cannot transpose it")
    if rules.is_undefined_primal(x):
        return [mul(ct, y), None]
    return [None, mul(x, ct)]


def _div_transpose(ct, x, y):
    if rules.is_undefined_primal(y):
        raise EmberTypeError("div is not linear in its divisor: cannot transpose it")
    return [div(ct, y), None]


add_p.def_transpose(lambda ct, x, y: [_linear_in(x, ct), _linear_in(y, ct)])
sub_p.def_transpose(lambda ct, x, y: [_linear_in(x, ct),
                                      neg(ct) if rules.is_undefined_primal(y) else None])
mul_p.def_transpose(_mul_transpose)
div_p.def_transpose(_div_transpose)
rules.deflinear(neg_p, lambda ct, x: [neg(ct)])
rules.deflinear(conj_p, lambda ct, x: [conj(ct)])
rules.deflinear(real_p, lambda ct, x: [convert_element_type(ct, x.dtype)])
rules.deflinear(imag_p, lambda ct, x: [mul(convert_element_type(neg(ct), x.dtype), 1j)])
rules.deflinear(convert_element_type_p,
                lambda ct, x, *, new_dtype: [convert_element_type(ct, x.dtype)])


def _select_n_transpose(ct, which, *cases):
    if rules.is_undefined_primal(which):
        raise EmberTypeError("select_n is not linear in its predicate: cannot transpose it")
    zeros = _zeros_like(ct)
    return [None] + [
        select_n(which, *[ct if j == i else zeros for j in range(len(cases))])
        if rules.is_undefined_primal(case) else None
        for i, case in enumerate(cases)]


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n(which, *cases)
    if all(isinstance(t, rules.Zero) for t in tangents[1:]):
        return out, rules.Zero.like(out)
    return out, select_n(which, *[rules.instantiate(t) for t in tangents[1:]])


select_n_p.def_jvp(rules.accepts_symbolic_zeros(_select_n_jvp))
select_n_p.def_transpose(_select_n_transpose)


def _clamp_jvp_lo(t, lo, x, hi):
    return _where(bitwise_and(gt(_bcast_to(lo, x), x), lt(_bcast_to(lo, x), _bcast_to(hi, x))),
                  _bcast_to(t, x), _zeros_like(x))


def _clamp_jvp_x(t, lo, x, hi):
    return _where(bitwise_and(gt(x, _bcast_to(lo, x)), lt(x, _bcast_to(hi, x))), t,
                  _zeros_like(x))


def _clamp_jvp_hi(t, lo, x, hi):
    return _where(lt(_bcast_to(hi, x), x), _bcast_to(t, x), _zeros_like(x))


rules.defjvp(clamp_p, _clamp_jvp_lo, _clamp_jvp_x, _clamp_jvp_hi)

_NONLINEAR = [p for p in ELEMENTWISE.values() if p.transpose_rule is None]
for _prim in _NONLINEAR:
    _prim.waive("transpose", "not linear in its operands")
