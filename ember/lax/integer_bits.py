"""Integer bit arithmetic of ``jax.lax`` built from its primitives: ``clz`` (leading zero
bits) and ``mulhi`` (the high half of a product)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import aval_of
from ember.errors import EmberTypeError
from ember.ops import elementwise as ew
from ember.ops.bitcast import bitcast_convert_type
from ember.ops.structural import broadcast_in_dim

__all__ = ["clz", "mulhi"]


def _integer_dtype(x: Any, op: str) -> np.dtype:
    dtype = np.dtype(aval_of(x).dtype)
    if not dtypes.is_integer(dtype):
        raise EmberTypeError(f"{op} takes integers, got {dtype}")
    return dtype


def _full(value: int, dtype: np.dtype, like: Any) -> Any:
    return broadcast_in_dim(np.asarray(value, dtype), tuple(aval_of(like).shape), ())


def clz(x: Any) -> Any:
    """The number of leading zero bits of each integer, as ``jax.lax.clz`` (all bits for 0)."""
    dtype = _integer_dtype(x, "clz")
    bits = dtype.itemsize * 8
    smeared = x  # every bit below the highest set bit set too
    shift = 1
    while shift < bits:
        smeared = ew.bitwise_or(smeared, ew.shift_right_logical(smeared, _full(shift, dtype, x)))
        shift *= 2
    return ew.sub(_full(bits, dtype, x), ew.population_count(smeared))


def mulhi(x: Any, y: Any, /) -> Any:
    """The high half of each product ``x * y`` computed at twice the width, as
    ``jax.lax.mulhi`` (8-, 16- and 32-bit integers)."""
    dtype = _integer_dtype(x, "mulhi")
    if np.dtype(aval_of(y).dtype) != dtype:
        raise EmberTypeError(f"mulhi takes two operands of one dtype, got {dtype} and "
                             f"{aval_of(y).dtype}")
    if dtype.itemsize > 4:
        raise EmberTypeError(f"mulhi of {dtype}: Ember has no integer twice as wide")
    if dtype.itemsize == 4:
        return _mulhi32(x, y, dtype)
    wide = np.dtype(f"{dtype.kind}{dtype.itemsize * 2}")
    product = ew.mul(ew.convert_element_type(x, wide), ew.convert_element_type(y, wide))
    shift = ew.shift_right_arithmetic if dtype.kind == "i" else ew.shift_right_logical
    return ew.convert_element_type(shift(product, _full(dtype.itemsize * 8, wide, product)),
                                   dtype)


def _mulhi32(x: Any, y: Any, dtype: np.dtype) -> Any:
    """32-bit ``mulhi`` in 32-bit arithmetic (no 64-bit integers without x64): the
    unsigned product from 16-bit halves; a signed one corrected by the operands' signs."""
    u32 = np.dtype(np.uint32)
    a, b = (bitcast_convert_type(v, u32) if dtype.kind == "i" else v for v in (x, y))
    half, low_bits = _full(16, u32, a), _full(0xFFFF, u32, a)
    a_hi, a_lo = ew.shift_right_logical(a, half), ew.bitwise_and(a, low_bits)
    b_hi, b_lo = ew.shift_right_logical(b, half), ew.bitwise_and(b, low_bits)
    low, cross_1, cross_2 = ew.mul(a_lo, b_lo), ew.mul(a_lo, b_hi), ew.mul(a_hi, b_lo)
    middle = ew.add(ew.add(ew.shift_right_logical(low, half), ew.bitwise_and(cross_1, low_bits)),
                    ew.bitwise_and(cross_2, low_bits))
    high = ew.add(ew.add(ew.mul(a_hi, b_hi), ew.shift_right_logical(cross_1, half)),
                  ew.add(ew.shift_right_logical(cross_2, half),
                         ew.shift_right_logical(middle, half)))
    if dtype.kind == "u":
        return high
    zero = _full(0, dtype, x)
    high = ew.sub(high, ew.select_n(ew.lt(x, zero), _full(0, u32, a), b))
    high = ew.sub(high, ew.select_n(ew.lt(y, zero), _full(0, u32, a), a))
    return bitcast_convert_type(high, dtype)
