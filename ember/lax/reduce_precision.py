"""``lax.reduce_precision``: floats rounded to a narrower format (fewer exponent and
mantissa bits) and kept in their own dtype, as XLA's ReducePrecision: the mantissa
rounded to nearest even; with fewer exponent bits, an exponent beyond their range made
±inf (too large) or ±0 (too small: the narrower format keeps no subnormals); NaN kept. Written with bit operations on the
float's integer view, so it compiles like any other elementwise code."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import aval_of
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import elementwise as ew
from ember.ops.bitcast import bitcast_convert_type
from ember.ops.structural import broadcast_in_dim
from ember.transforms.custom import custom_jvp, linear_map, linearizing

__all__ = ["reduce_precision"]


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """``operand`` rounded to ``exponent_bits`` / ``mantissa_bits`` (float16 is 5 / 10,
    bfloat16 8 / 7), as ``jax.lax.reduce_precision``. It is linear in its derivatives, as
    JAX's: tangents and cotangents are rounded the same way."""
    dtype = np.dtype(aval_of(operand).dtype)
    if not dtypes.is_floating(dtype):
        raise EmberTypeError(f"reduce_precision takes floats, got {dtype}")
    exponent_bits, mantissa_bits = int(exponent_bits), int(mantissa_bits)
    if exponent_bits < 1 or mantissa_bits < 0:
        raise EmberValueError(f"reduce_precision needs exponent_bits >= 1 and "
                              f"mantissa_bits >= 0, got {exponent_bits} and {mantissa_bits}")

    def rounding(x: Any) -> Any:
        return _rounded(x, dtype, exponent_bits, mantissa_bits)

    @custom_jvp
    def rounded(x: Any) -> Any:
        return rounding(x)

    @rounded.defjvp
    def _rounded_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        # Linear, as JAX's: the tangent rounded, and in reverse mode the cotangent.
        (x,), (t,) = primals, tangents
        if not linearizing([t]):
            return rounded(x), rounding(t)
        return rounded(x), linear_map((), t, lambda _, cts: [rounding(cts[0])], x,
                                      "reduce_precision")

    return rounded(operand)


def _rounded(operand: Any, dtype: np.dtype, exponent_bits: int, mantissa_bits: int) -> Any:
    info = dtypes.finfo(dtype)
    width, src_mantissa = dtype.itemsize * 8, int(info.nmant)
    src_exponent = width - 1 - src_mantissa
    unsigned = np.dtype(f"uint{width}")
    shape = tuple(aval_of(operand).shape)

    def const(value: int) -> Any:
        return broadcast_in_dim(np.asarray(value, unsigned), shape, ())

    bits = bitcast_convert_type(operand, unsigned)
    if mantissa_bits < src_mantissa:
        drop = src_mantissa - mantissa_bits
        last_kept = ew.bitwise_and(ew.shift_right_logical(bits, const(drop)), const(1))
        bias = ew.add(last_kept, const((1 << (drop - 1)) - 1))  # ties go to the even one
        bits = ew.bitwise_and(ew.add(bits, bias), const(~((1 << drop) - 1) & (2 ** width - 1)))
    if exponent_bits < src_exponent:
        exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
        bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = ew.bitwise_and(bits, const(exponent_mask))
        sign = ew.bitwise_and(bits, const(1 << (width - 1)))
        too_large = ew.gt(exponent, const((bias + reduced_bias) << src_mantissa))
        too_small = ew.le(exponent, const((bias - reduced_bias) << src_mantissa))
        bits = ew.select_n(too_large, ew.select_n(too_small, bits, sign),
                           ew.bitwise_or(sign, const(exponent_mask)))
    result = bitcast_convert_type(bits, dtype)
    return ew.select_n(ew.ne(operand, operand), result, operand)  # NaN stays NaN
