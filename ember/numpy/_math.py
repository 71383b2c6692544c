"""Elementwise functions built from several primitives: division and remainder with
Python semantics, power, rounding, clip, where, NaN / infinity tests, isclose,
logaddexp, hypot, copysign and friends.

Integer division by zero: ``floor_divide(x, 0)``, ``remainder(x, 0)`` and ``fmod(x, 0)``
are 0 for integers, as NumPy's results (without NumPy's warning); floats follow IEEE
(``x / 0`` is ±inf or nan, ``remainder(x, 0.)`` nan). Integer overflow wraps around
(two's complement). ``signbit`` reads the sign bit itself, so ``signbit(-0.0)`` and
``signbit(-nan)`` are True, and ``copysign`` copies it.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy import _ufuncs
from ember.numpy._complex_special_cases import complex_from_parts
from ember.numpy._complex_special_cases import divide as divide_with_recovery
from ember.numpy._complex_special_cases import log_base as log_base_of
from ember.numpy._ufunc_objects import builtin
from ember.numpy._creation import full
from ember.ops.bitcast import sign_bit
from ember.transforms.custom import custom_jvp
from ember.numpy._promotion import (
    broadcast_shapes, broadcast_to_shape, constant_like, ensure_array, promote_args,
    promote_args_inexact, sequence_arg, shape_of,
)

__all__ = [
    "true_divide", "divide", "floor_divide", "remainder", "mod", "fmod", "divmod", "power",
    "pow", "float_power", "positive", "sign", "signbit", "copysign", "floor", "ceil", "trunc",
    "fix", "rint", "round", "around", "clip", "where", "isnan", "isinf", "isfinite",
    "isposinf", "isneginf", "isclose", "allclose", "logaddexp", "logaddexp2", "hypot",
    "deg2rad", "rad2deg", "radians", "degrees", "reciprocal", "log2", "log10", "sinc",
    "heaviside", "fmax", "fmin", "nan_to_num", "real", "imag", "angle", "select", "interp",
    "fabs", "array_equal", "array_equiv", "iscomplex", "isreal",
]


def _select(pred: Any, on_true: Any, on_false: Any) -> Any:
    return lax.select_n(pred, on_false, on_true)


def _no_complex(name: str, x: Any) -> None:
    if dtypes.is_complex(x.dtype):
        raise EmberTypeError(f"{name} is not defined for complex dtype {x.dtype}")


def true_divide(x1: Any, x2: Any, /):
    """``x1 / x2``; integers divide as floats (the default float dtype). Complex
    quotients recover infinities and zeros as C99 Annex G (and JAX) do."""
    return divide_with_recovery(*promote_args_inexact(x1, x2))


divide = true_divide


def _floor_adjust(rem: Any, divisor: Any) -> Any:
    """Where a C remainder needs the divisor added to get Python's (sign of the divisor)."""
    nonzero = lax.ne(rem, 0)
    signs_differ = lax.ne(lax.lt(rem, 0), lax.lt(divisor, 0))
    return lax.bitwise_and(nonzero, signs_differ)


def _int_by_nonzero(x: Any, y: Any, fn) -> Any:
    """``fn(x, y)`` for integers, 0 where ``y`` is 0 (NumPy's result). ``lax.div`` and
    ``lax.rem`` are defined for a zero divisor (as XLA's), so ``fn`` sees the divisor as
    given: ``checkify.div_checks`` finds a zero in it, as JAX's does."""
    return _select(lax.eq(y, constant_like(0, y)), constant_like(0, x), fn(x, y))


def _int_floor_divide(x: Any, y: Any) -> Any:
    quotient = lax.div(x, y)
    if dtypes.is_unsigned(x.dtype):
        return quotient
    adjust = _floor_adjust(lax.rem(x, y), y)
    return _select(adjust, lax.sub(quotient, constant_like(1, quotient)), quotient)


def _int_remainder(x: Any, y: Any) -> Any:
    rem = lax.rem(x, y)
    if dtypes.is_unsigned(x.dtype):
        return rem
    return _select(_floor_adjust(rem, y), lax.add(rem, y), rem)


def floor_divide(x1: Any, x2: Any, /):
    """``x1 // x2`` rounding toward -inf (Python semantics, on top of lax.div / lax.rem)."""
    x, y = promote_args(x1, x2)
    _no_complex("floor_divide", x)
    if not dtypes.is_inexact(x.dtype):
        return _int_by_nonzero(x, y, _int_floor_divide)
    # NumPy's algorithm: exact for representable quotients, x / 0 follows IEEE.
    mod = lax.rem(x, y)
    div = lax.div(lax.sub(x, mod), y)
    div = _select(_floor_adjust(mod, y), lax.sub(div, constant_like(1, div)), div)
    floor = lax.floor(div)
    floor = _select(lax.gt(lax.sub(div, floor), constant_like(0.5, div)),
                    lax.add(floor, constant_like(1, floor)), floor)
    # A zero quotient takes the sign of x / y (-0. // 2.5 is -0.; -2.5 // -inf is +0.).
    floor = _select(lax.eq(div, constant_like(0, div)), _signed_zero(lax.div(x, y)), floor)
    return _select(lax.eq(y, constant_like(0, y)), lax.div(x, y), floor)


def _signed_zero(like: Any) -> Any:
    """A zero with the sign of ``like`` (of its sign bit for zeros)."""
    return _select(signbit(like), constant_like(-0.0, like), constant_like(0.0, like))


def remainder(x1: Any, x2: Any, /):
    """``x1 % x2`` with the sign of the divisor (Python semantics)."""
    x, y = promote_args(x1, x2)
    _no_complex("remainder", x)
    if not dtypes.is_inexact(x.dtype):
        return _int_by_nonzero(x, y, _int_remainder)
    return _float_remainder(x, y)


@custom_jvp
def _float_remainder(x: Any, y: Any) -> Any:
    mod = lax.rem(x, y)
    adjusted = _select(_floor_adjust(mod, y), lax.add(mod, y), mod)
    # A zero remainder takes the divisor's sign, as every other result does.
    return _select(lax.eq(mod, constant_like(0, mod)), _signed_zero(y), adjusted)


@_float_remainder.defjvp
def _float_remainder_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """The slopes of ``x - y * floor(x / y)``, as JAX's: 1 in ``x`` also where the
    remainder is 0 (the signed zero chosen there is a constant), -floor(x / y) in ``y``."""
    (x, y), (x_dot, y_dot) = primals, tangents
    quotient = lax.floor(lax.div(x, y))
    return _float_remainder(x, y), lax.sub(x_dot, lax.mul(quotient, y_dot))


mod = remainder


def fmod(x1: Any, x2: Any, /):
    """C's ``fmod``: the remainder with the sign of the dividend."""
    x, y = promote_args(x1, x2)
    _no_complex("fmod", x)
    if not dtypes.is_inexact(x.dtype):
        return _int_by_nonzero(x, y, lax.rem)
    return lax.rem(x, y)


def divmod(x1: Any, x2: Any, /) -> tuple[Any, Any]:
    return floor_divide(x1, x2), remainder(x1, x2)


def power(x1: Any, x2: Any, /):
    """``x1 ** x2``. A Python int exponent uses repeated multiplication (``integer_pow``).
    Complex powers are NumPy's (exact for real integer exponents, ``0 ** z == 0`` where
    ``Re(z) > 0``), not JAX's ``exp(x2 * log(x1))``: see README, Numerics."""
    if type(x2) is int and not dtypes.is_weak_scalar(x1):
        base = ensure_array(x1)
        if not dtypes.is_bool(base.dtype):
            if x2 < 0 and dtypes.is_integer(base.dtype):
                raise EmberValueError(f"integers to negative integer powers are not allowed "
                                      f"({base.dtype} ** {x2})")
            return lax.integer_pow(base, x2)
    x, y = promote_args(x1, x2)
    return lax.pow(x, y)


pow = power


def float_power(x1: Any, x2: Any, /):
    """``x1 ** x2`` computed in floating point (the default float for integer inputs)."""
    return lax.pow(*promote_args_inexact(x1, x2))


def positive(x: Any, /):
    return ensure_array(x)


def fabs(x: Any, /):
    """``|x|`` as a float (integers go to the default float; complex is an error)."""
    (x,) = promote_args_inexact(x)
    _no_complex("fabs", x)
    return lax.abs(x)


def sign(x: Any, /):
    (x,) = promote_args(x)
    if dtypes.is_bool(x.dtype):
        raise EmberTypeError("sign is not defined for bool arrays")
    return lax.sign(x)


def signbit(x: Any, /):
    """True where the sign bit is set: negative numbers, ``-0.0`` and NaNs with a sign."""
    (x,) = promote_args(x)
    _no_complex("signbit", x)
    if not dtypes.is_signed(x.dtype) and not dtypes.is_floating(x.dtype):
        return full(x.shape, False, dtypes.bool_)
    if dtypes.is_integer(x.dtype):
        return lax.lt(x, constant_like(0, x))
    return sign_bit(x)


def copysign(x1: Any, x2: Any, /):
    """``|x1|`` with the sign of ``x2``."""
    x, y = promote_args_inexact(x1, x2)
    _no_complex("copysign", x)
    magnitude = lax.abs(x)
    return _select(signbit(y), lax.neg(magnitude), magnitude)


def _float_only(name: str, fn):
    """A rounding function: identity on integers and bools (as the Array API says)."""
    def rounding(x: Any, /):
        (x,) = promote_args(x)
        _no_complex(name, x)
        return fn(x) if dtypes.is_floating(x.dtype) else ensure_array(x)

    rounding.__name__ = rounding.__qualname__ = name
    rounding.__doc__ = f"Elementwise ``{name}``; integers are returned unchanged."
    return rounding


def _trunc(x: Any) -> Any:
    return _select(lax.lt(x, constant_like(0, x)), lax.ceil(x), lax.floor(x))


floor = _float_only("floor", lax.floor)
ceil = _float_only("ceil", lax.ceil)
trunc = fix = _float_only("trunc", _trunc)
rint = _float_only("rint", lambda x: lax.round(x, 1))


def round(a: Any, decimals: int = 0, out: None = None):
    """Round half to even to ``decimals`` digits (NumPy's algorithm: scale, rint, unscale)."""
    if out is not None:
        raise EmberValueError("round(out=...) is not supported: Ember arrays are immutable")
    (x,) = promote_args(a)
    decimals = int(decimals)
    if dtypes.is_integer(x.dtype) or dtypes.is_bool(x.dtype):
        if decimals >= 0:
            return ensure_array(x)
        rounded = round(lax.convert_element_type(x, dtypes.default_float()), decimals)
        return lax.convert_element_type(rounded, x.dtype)
    if dtypes.is_complex(x.dtype):  # the Array API rounds both parts
        return complex_from_parts(round(lax.real(x), decimals), round(lax.imag(x), decimals),
                                  x.dtype)
    if decimals == 0:
        return lax.round(x, 1)
    factor = constant_like(10.0 ** builtins.abs(decimals), x)
    if decimals > 0:
        return lax.div(lax.round(lax.mul(x, factor), 1), factor)
    return lax.mul(lax.round(lax.div(x, factor), 1), factor)


around = round


def clip(a: Any, min: Any = None, max: Any = None, *, a_min: Any = None, a_max: Any = None):
    """``a`` limited to ``[min, max]`` (either bound may be None; NaNs propagate)."""
    low = min if min is not None else a_min
    high = max if max is not None else a_max
    out = ensure_array(a)
    if low is not None:
        out = lax.max(*promote_args(out, low))
    if high is not None:
        out = lax.min(*promote_args(out, high))
    return out


def where(condition: Any, x: Any = None, y: Any = None, /, *, size: int | None = None,
          fill_value: Any = None):
    """``x`` where ``condition`` holds, else ``y``; with one argument, ``nonzero(condition)``."""
    if x is None and y is None:
        from ember.numpy._searching import nonzero

        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise EmberValueError("where takes one argument or three (condition, x, y)")
    shape = broadcast_shapes(shape_of(condition), shape_of(x), shape_of(y))
    on_true, on_false = (broadcast_to_shape(v, shape) for v in promote_args(x, y))
    (pred,) = promote_args(condition, dtype=dtypes.bool_)
    return lax.select_n(broadcast_to_shape(pred, shape), on_false, on_true)


def _complex_parts_any(fn, x: Any) -> Any:
    return lax.bitwise_or(fn(lax.real(x)), fn(lax.imag(x)))


def _classify(name: str, float_fn, integer_result: bool):
    """A float predicate that is constant for integers (isnan, isinf, isfinite)."""
    def predicate(x: Any, /):
        (x,) = promote_args(x)
        if dtypes.is_complex(x.dtype):
            if name == "isfinite":
                return lax.bitwise_and(float_fn(lax.real(x)), float_fn(lax.imag(x)))
            return _complex_parts_any(float_fn, x)
        if not dtypes.is_floating(x.dtype):
            return full(x.shape, integer_result, dtypes.bool_)
        return float_fn(x)

    predicate.__name__ = predicate.__qualname__ = name
    predicate.__doc__ = f"Elementwise ``{name}`` (always {integer_result} for integers)."
    return predicate


def _isnan(x: Any) -> Any:
    return lax.ne(x, x)


def _isinf(x: Any) -> Any:
    return lax.eq(lax.abs(x), constant_like(np.inf, x))


isnan = _classify("isnan", _isnan, False)
isinf = _classify("isinf", _isinf, False)
isfinite = _classify("isfinite", lax.is_finite, True)


def isposinf(x: Any, /):
    (x,) = promote_args(x)
    return lax.eq(x, constant_like(np.inf, x)) if dtypes.is_floating(x.dtype) else isinf(x)


def isneginf(x: Any, /):
    (x,) = promote_args(x)
    return lax.eq(x, constant_like(-np.inf, x)) if dtypes.is_floating(x.dtype) else isinf(x)


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """``|a - b| <= atol + rtol * |b|`` elementwise, infinities equal only to themselves."""
    x, y = promote_args_inexact(a, b)
    tolerance = lax.add(lax.mul(lax.abs(y), float(rtol)), float(atol))
    close = lax.bitwise_and(lax.le(lax.abs(lax.sub(x, y)), tolerance), isfinite(y))
    close = lax.bitwise_or(close, lax.eq(x, y))
    if equal_nan:
        close = lax.bitwise_or(close, lax.bitwise_and(isnan(x), isnan(y)))
    return close


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """Whether every element of ``a`` is close to ``b`` (see ``isclose``)."""
    from ember.numpy._reductions import all as all_

    return all_(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False):
    """Whether both have one shape and equal elements (NaNs equal with ``equal_nan``); a
    bool array, False for different shapes."""
    from ember.numpy._reductions import all as all_

    x, y = ensure_array(a1), ensure_array(a2)
    if x.shape != y.shape:
        return ensure_array(False)
    return all_(_equal(x, y, equal_nan))


def array_equiv(a1: Any, a2: Any):
    """Whether both broadcast to one shape and are equal elementwise there."""
    from ember.numpy._reductions import all as all_

    x, y = ensure_array(a1), ensure_array(a2)
    try:
        shape = broadcast_shapes(x.shape, y.shape)
    except EmberValueError:
        return ensure_array(False)
    return all_(_equal(broadcast_to_shape(x, shape), broadcast_to_shape(y, shape), False))


def _equal(x: Any, y: Any, equal_nan: bool) -> Any:
    x, y = promote_args(x, y)
    same = lax.eq(x, y)
    if equal_nan and dtypes.is_inexact(x.dtype):
        same = lax.bitwise_or(same, lax.bitwise_and(isnan(x), isnan(y)))
    return same


def iscomplex(x: Any, /):
    """Elementwise: whether the imaginary part is nonzero (False for real dtypes)."""
    (x,) = promote_args(x)
    return lax.ne(imag(x), constant_like(0, imag(x)))


def isreal(x: Any, /):
    """Elementwise: whether the imaginary part is zero (True for real dtypes)."""
    (x,) = promote_args(x)
    return lax.eq(imag(x), constant_like(0, imag(x)))


def _logaddexp(x: Any, y: Any, exp_fn, log1p_scale: float):
    _no_complex("logaddexp", x)
    larger = lax.max(x, y)
    delta = lax.sub(x, y)
    log_term = lax.log1p(exp_fn(lax.neg(lax.abs(delta))))
    if log1p_scale != 1.0:
        log_term = lax.mul(log_term, constant_like(log1p_scale, log_term))
    # Equal infinities give a NaN delta: their sum is the answer.
    return _select(_isnan(delta), lax.add(x, y), lax.add(larger, log_term))


def _logaddexp_e(x1: Any, x2: Any, /):
    """``log(exp(x1) + exp(x2))`` without overflow."""
    return _natural_logaddexp(*promote_args_inexact(x1, x2))


def _logaddexp_2(x1: Any, x2: Any, /):
    """``log2(2**x1 + 2**x2)`` without overflow."""
    return _binary_logaddexp(*promote_args_inexact(x1, x2))


# Their own derivatives, as JAX's: d out / d x1 = exp(x1 - out) (2**(x1 - out) for base
# 2), so that equal arguments split the slope in halves (through |x1 - x2|, whose slope
# at 0 is 1 as JAX's, one side would take all of it: softplus'(0) would be 0, not 1/2);
# a +inf counts as 0 on both sides (two +inf: slope 1 each, not NaN).

@custom_jvp
def _natural_logaddexp(x: Any, y: Any) -> Any:
    return _logaddexp(x, y, lax.exp, 1.0)


@custom_jvp
def _binary_logaddexp(x: Any, y: Any) -> Any:
    return _logaddexp(x, y, lax.exp2, 1 / math.log(2))


def _logaddexp_jvp(function: Any, exp_fn: Any):
    def jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        (x, y), (x_dot, y_dot) = primals, tangents
        out = function(x, y)
        finite_out = _finite_or_zero(out)
        slope_x = exp_fn(lax.sub(_finite_or_zero(x), finite_out))
        slope_y = exp_fn(lax.sub(_finite_or_zero(y), finite_out))
        return out, lax.add(lax.mul(x_dot, slope_x), lax.mul(y_dot, slope_y))
    return jvp


def _finite_or_zero(x: Any) -> Any:
    """``x``, with +inf taken as 0."""
    return _select(lax.eq(x, constant_like(np.inf, x)), constant_like(0, x), x)


_natural_logaddexp.defjvp(_logaddexp_jvp(_natural_logaddexp, lax.exp))
_binary_logaddexp.defjvp(_logaddexp_jvp(_binary_logaddexp, lax.exp2))


_logaddexp_e.__name__, _logaddexp_2.__name__ = "logaddexp", "logaddexp2"
logaddexp = builtin(_logaddexp_e, 2, -np.inf)  # ufuncs: logaddexp.reduce is a log-sum-exp
logaddexp2 = builtin(_logaddexp_2, 2, -np.inf)


def hypot(x1: Any, x2: Any, /):
    """``sqrt(x1**2 + x2**2)`` without intermediate overflow."""
    x, y = (lax.abs(v) for v in promote_args_inexact(x1, x2))
    _no_complex("hypot", x)
    larger, smaller = lax.max(x, y), lax.min(x, y)
    safe = _select(lax.eq(larger, constant_like(0, larger)), constant_like(1, larger), larger)
    ratio = lax.div(smaller, safe)
    out = lax.mul(larger, lax.sqrt(lax.add(constant_like(1, ratio), lax.mul(ratio, ratio))))
    return _select(lax.bitwise_or(_isinf(x), _isinf(y)), constant_like(np.inf, out), out)


def _scaled(name: str, factor: float):
    def scale(x: Any, /):
        (x,) = promote_args_inexact(x)
        return lax.mul(x, constant_like(factor, x))

    scale.__name__ = scale.__qualname__ = name
    return scale


deg2rad = radians = _scaled("deg2rad", math.pi / 180)
rad2deg = degrees = _scaled("rad2deg", 180 / math.pi)


def _log_base(name: str, base: float):
    def log_base(x: Any, /):
        (x,) = promote_args_inexact(x)
        return log_base_of(x, base)

    log_base.__name__ = log_base.__qualname__ = name
    log_base.__doc__ = f"Base-{base:g} logarithm."
    return log_base


log2 = _log_base("log2", 2)
log10 = _log_base("log10", 10)


def reciprocal(x: Any, /):
    """``1 / x`` in ``x``'s dtype (integers divide as C does: toward zero)."""
    (x,) = promote_args(x)
    return lax.div(constant_like(1, x), x)


def sinc(x: Any, /):
    """``sin(pi x) / (pi x)``, 1 at 0."""
    (x,) = promote_args_inexact(x)
    zero = lax.eq(x, constant_like(0, x))
    scaled = lax.mul(_select(zero, constant_like(1, x), x), constant_like(math.pi, x))
    return _select(zero, constant_like(1, x), lax.div(lax.sin(scaled), scaled))


def heaviside(x1: Any, x2: Any, /):
    """0 where ``x1 < 0``, ``x2`` where ``x1 == 0``, 1 where ``x1 > 0``."""
    x, h0 = promote_args_inexact(x1, x2)
    out = _select(lax.gt(x, constant_like(0, x)), constant_like(1, x), h0)
    out = _select(lax.lt(x, constant_like(0, x)), constant_like(0, x), out)
    return _select(_isnan(x), x, out)


def _nan_ignoring(name: str, combine, wins):
    """``name``: ``combine`` where a NaN loses against a number. For real floats JAX's
    form, ``x1`` where it ``wins`` over ``x2`` or ``x2`` is NaN, else ``x2``: on a tie the
    derivative goes to ``x2`` alone (``fmax(x, 0)`` has slope 0 at 0), not half to each."""
    def fn(x1: Any, x2: Any, /):
        x, y = promote_args(x1, x2)
        if not dtypes.is_inexact(x.dtype):
            return combine(x, y)
        if dtypes.is_complex(x.dtype):
            return _select(_isnan(y), x, _select(_isnan(x), y, combine(x, y)))
        return _select(lax.bitwise_or(wins(x, y), _isnan(y)), x, y)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``: a NaN loses against a number."
    return fn


fmax = _nan_ignoring("fmax", lax.max, lax.gt)
fmin = _nan_ignoring("fmin", lax.min, lax.lt)


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None):
    """NaN to ``nan``, infinities to ``posinf`` / ``neginf`` (default: the finite extremes)."""
    (x,) = promote_args(x)
    if not dtypes.is_floating(x.dtype):
        return ensure_array(x)
    info = dtypes.finfo(x.dtype)
    out = _select(_isnan(x), constant_like(nan, x), x)
    high = info.max if posinf is None else posinf
    low = info.min if neginf is None else neginf
    out = _select(lax.eq(x, np.inf), constant_like(high, x), out)
    return _select(lax.eq(x, -np.inf), constant_like(low, x), out)


def real(val: Any, /):
    (x,) = promote_args(val)
    return lax.real(x) if dtypes.is_complex(x.dtype) else ensure_array(x)


def imag(val: Any, /):
    (x,) = promote_args(val)
    return lax.imag(x) if dtypes.is_complex(x.dtype) else full(x.shape, 0, x.dtype)


def angle(z: Any, deg: bool = False):
    """The argument of complex ``z`` (radians, or degrees with ``deg=True``)."""
    (x,) = promote_args_inexact(z)
    if dtypes.is_complex(x.dtype):
        out = lax.atan2(lax.imag(x), lax.real(x))
    else:
        out = lax.atan2(constant_like(0, x), x)
    return rad2deg(out) if deg else out


def select(condlist: Any, choicelist: Any, default: Any = 0):
    """The choice of the first true condition, elementwise (``default`` where none holds)."""
    condlist = sequence_arg(condlist, "select", "a sequence of condition arrays")
    choicelist = sequence_arg(choicelist, "select", "a sequence of choice arrays")
    if len(condlist) != len(choicelist):
        raise EmberValueError(f"select: {len(condlist)} conditions for {len(choicelist)} "
                              "choices")
    result = default
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        result = where(condition, choice, result)
    return ensure_array(result)


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None):
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at ``x``;
    ``left`` / ``right`` (default: the end values) outside ``[xp[0], xp[-1]]``."""
    from ember.numpy._searching import searchsorted
    from ember.numpy.indexing import take

    if period is not None:
        raise EmberValueError("interp(period=...) is not supported")
    points, values = promote_args_inexact(xp, fp)
    (query,) = promote_args(x, dtype=points.dtype)
    if points.ndim != 1 or points.shape != values.shape or points.shape[0] == 0:
        raise EmberValueError(f"interp: xp and fp must be 1-D of one non-zero length, got "
                              f"shapes {points.shape} and {values.shape}")
    n = points.shape[0]
    upper = lax.clamp(1, searchsorted(points, query, side="right"), max(n - 1, 1))
    lower = lax.sub(upper, 1)
    x0, x1 = take(points, lower, mode="clip"), take(points, upper, mode="clip")
    y0, y1 = take(values, lower, mode="clip"), take(values, upper, mode="clip")
    step = lax.sub(x1, x0)
    slope = lax.div(lax.sub(y1, y0), _select(lax.eq(step, 0.0), constant_like(1, step), step))
    out = lax.add(y0, lax.mul(slope, lax.sub(query, x0)))
    below = _ufuncs.less(query, take(points, 0))
    above = _ufuncs.greater(query, take(points, n - 1))
    out = where(below, values[0] if left is None else left, out)
    return where(above, values[-1] if right is None else right, out)
