"""The parts of floating-point numbers: frexp, ldexp, modf, spacing.

No primitive reinterprets a float's bits, so exponents are found arithmetically: an
estimate from ``log2`` corrected by comparing the scaled mantissa with [0.5, 1). Every
scaling is a multiplication by an exact power of two, built as a product of constant
powers (``_pow2``), so results are exact (NumPy's), subnormals and overflow included:
``ldexp`` rounds once, in its last multiplication.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError
from ember.numpy._math import copysign, isfinite, isinf, signbit, trunc, where
from ember.numpy._promotion import (
    broadcast_shapes, broadcast_to_shape, constant_like, dtype_of, promote_args,
    promote_args_inexact, shape_of,
)

__all__ = ["frexp", "ldexp", "modf", "spacing"]


class _Format:
    """The exponent range of a float dtype: normal numbers are ``[2**min_exp, 2**max_exp)``
    times the sign, the smallest subnormal is ``2**tiny_exp``."""

    def __init__(self, dtype: np.dtype):
        info = dtypes.finfo(dtype)
        self.max_exp = int(info.maxexp) - 1  # largest power of two that is finite
        self.min_exp = int(info.minexp)
        self.mantissa = int(info.nmant)
        self.tiny_exp = self.min_exp - self.mantissa
        self.bits = max(-self.tiny_exp, self.max_exp).bit_length()


def _pow2(k: Any, dtype: np.dtype) -> Any:
    """``2.0 ** k`` exactly, for integer ``k`` in ``[tiny_exp, max_exp]`` of ``dtype``: a
    product of the constants ``2 ** (+-2 ** b)`` picked by the bits of ``|k|`` (every
    partial product is a power of two between 1 and the result, so representable)."""
    fmt = _Format(dtype)
    magnitude = lax.abs(k)
    negative = lax.lt(k, constant_like(0, k))
    out = constant_like(1, lax.convert_element_type(k, dtype))
    for b in range(fmt.bits):
        step = 1 << b
        bit = lax.ne(lax.bitwise_and(magnitude, constant_like(step, k)), constant_like(0, k))
        up = math.ldexp(1.0, step) if step <= fmt.max_exp else 1.0  # not needed in range
        factor = where(negative, constant_like(math.ldexp(1.0, -step), out),
                       constant_like(up, out))
        out = lax.mul(out, where(bit, factor, constant_like(1, out)))
    return out


def _no_complex(name: str, x: Any) -> None:
    if dtypes.is_complex(x.dtype):
        raise EmberTypeError(f"{name} is not defined for complex dtype {x.dtype}")


def _log2(x: Any) -> Any:
    return lax.div(lax.log(x), constant_like(math.log(2), x))


def frexp(x: Any, /) -> tuple[Any, Any]:
    """Mantissa and exponent: ``x == m * 2**e`` with ``0.5 <= |m| < 1`` (``m = x`` and
    ``e = 0`` for zeros, infinities and NaN)."""
    (x,) = promote_args_inexact(x)
    _no_complex("frexp", x)
    fmt = _Format(x.dtype)
    int_dtype = dtypes.default_int()
    magnitude = lax.abs(x)
    subnormal = lax.lt(magnitude, constant_like(math.ldexp(1.0, fmt.min_exp), magnitude))
    # Subnormals are scaled into the normal range first (exactly), then scaled back.
    normal = where(subnormal, lax.mul(magnitude, math.ldexp(1.0, fmt.mantissa)), magnitude)
    special = lax.bitwise_or(lax.eq(magnitude, constant_like(0, magnitude)),
                             lax.bitwise_not(isfinite(x)))
    safe = where(special, constant_like(1, normal), normal)
    estimate = lax.add(lax.convert_element_type(lax.floor(_log2(safe)), int_dtype), 1)
    mantissa = lax.mul(safe, _pow2(lax.neg(estimate), x.dtype))
    too_big = lax.ge(mantissa, constant_like(1, mantissa))
    too_small = lax.lt(mantissa, constant_like(0.5, mantissa))
    mantissa = where(too_big, lax.mul(mantissa, 0.5),
                     where(too_small, lax.mul(mantissa, 2.0), mantissa))
    exponent = lax.add(estimate, lax.sub(lax.convert_element_type(too_big, int_dtype),
                                         lax.convert_element_type(too_small, int_dtype)))
    exponent = where(subnormal, lax.sub(exponent, fmt.mantissa), exponent)
    mantissa = where(special, x, copysign(mantissa, x))
    return mantissa, where(special, constant_like(0, exponent), exponent)


def ldexp(x1: Any, x2: Any, /):
    """``x1 * 2**x2`` for integer ``x2``, rounded once: exact unless the result is
    subnormal; +-inf past the largest float, +-0 below the smallest subnormal."""
    if not (dtypes.is_integer(dtype_of(x2)) or dtypes.is_bool(dtype_of(x2))):
        raise EmberTypeError(f"ldexp: the exponent x2 must be integers, got {dtype_of(x2)}")
    (x,) = promote_args_inexact(x1)
    _no_complex("ldexp", x)
    shape = broadcast_shapes(x.shape, shape_of(x2))
    x = broadcast_to_shape(x, shape)
    fmt = _Format(x.dtype)
    mantissa, exponent = frexp(x)  # zeros have m = 0 and infinities / NaN are kept below
    limit = fmt.max_exp - fmt.tiny_exp + 2  # beyond it results saturate (and no overflow)
    (shift,) = promote_args(x2, dtype=exponent.dtype)
    t = lax.add(exponent, lax.clamp(-limit, broadcast_to_shape(shift, shape), limit))
    # Positive t: 2m in [1, 2) times 2**(t - 1), doubled once more past the largest power.
    high = lax.mul(lax.mul(mantissa, 2.0), _pow2(lax.min(lax.sub(t, 1), constant_like(
        fmt.max_exp, t)), x.dtype))
    high = where(lax.gt(t, fmt.max_exp + 1), lax.mul(high, 2.0), high)
    # Otherwise one multiplication by an exact (perhaps subnormal) power rounds once.
    low = lax.mul(mantissa, _pow2(lax.clamp(fmt.tiny_exp, t, 0), x.dtype))
    low = where(lax.lt(t, fmt.tiny_exp), lax.mul(mantissa, 0.0), low)
    return where(isfinite(x), where(lax.gt(t, 0), high, low), x)


def modf(x: Any, /) -> tuple[Any, Any]:
    """Fractional and integral parts, both with the sign of ``x`` (``modf(-inf)`` is
    ``(-0.0, -inf)``)."""
    (x,) = promote_args_inexact(x)
    _no_complex("modf", x)
    negative = signbit(x)
    # (|x| by the sign bit, not lax.abs: the slope of the fraction is 1 at -0 too)
    magnitude = where(negative, lax.neg(x), x)
    fraction = lax.sub(magnitude, lax.floor(magnitude))  # >= +0 (the slope stays 1)
    fraction = where(isinf(x), constant_like(0, x), fraction)
    return where(negative, lax.neg(fraction), fraction), trunc(x)


def spacing(x: Any, /):
    """The distance from ``x`` to the next float away from zero (negative for negative
    ``x``, the smallest subnormal for either zero; NaN for infinities)."""
    (x,) = promote_args_inexact(x)
    _no_complex("spacing", x)
    away = where(lax.eq(x, constant_like(0, x)), constant_like(np.inf, x),
                 copysign(constant_like(np.inf, x), x))
    return lax.sub(lax.nextafter(x, away), x)
