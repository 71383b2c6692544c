"""bitcast_convert_type: the bits of each element read as another dtype, as JAX's lax.

The primitive reinterprets elements of equal width (float32 <-> int32 / uint32, float16
<-> int16, float64 <-> int64, ...), so it is elementwise: it fuses, and every renderer
computes it (``Renderer.bitcast``). Between widths, the lax function splits or joins
elements with shifts around it, as XLA does on a little-endian host: ``float32 ->
uint8`` adds a trailing axis of 4 bytes, lowest first; ``uint8[..., 4] -> float32``
removes it. Bool and complex are refused unless the dtype stays the same, as JAX does.
Its derivative is zero (the result is not a smooth function of the operand).

Targets compute half precision in float32, so a float16 NaN may come back with another
payload (OpenCL's ``vstore_half`` makes every NaN ``0x7fff``); its sign bit stays.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import rules
from ember.ops.elementwise import (ELEMENTWISE, bitwise_and, bitwise_or, convert_element_type,
                                   ne, shift_left, shift_right_logical)
from ember.ops.sharding_rules import elementwise_sharding
from ember.ops.structural import broadcast_in_dim, concatenate, index_in_dim

__all__ = ["bitcast_convert_type"]

bitcast_convert_type_p = Primitive("bitcast_convert_type")
ELEMENTWISE["bitcast_convert_type"] = bitcast_convert_type_p


def _check_kinds(source: np.dtype, target: np.dtype) -> None:
    for dtype in (source, target):
        if dtypes.is_bool(dtype) or dtypes.is_complex(dtype):
            raise EmberTypeError(
                f"bitcast_convert_type does not reinterpret bool or complex values "
                f"(got {source} -> {target}); view a complex array as its real and "
                f"imaginary parts (lax.real / lax.imag) or a bool array as uint8 "
                f"(convert_element_type) first")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_abstract(x: ShapedArray, *, new_dtype: np.dtype) -> ShapedArray:
    _check_kinds(x.dtype, new_dtype)
    if x.dtype.itemsize != new_dtype.itemsize:
        raise EmberValueError(
            f"the bitcast_convert_type primitive needs equal widths, got {x.dtype} -> "
            f"{new_dtype}; call lax.bitcast_convert_type, which splits or joins elements")
    return ShapedArray(x.shape, new_dtype)


@bitcast_convert_type_p.def_impl
def _bitcast_impl(x: np.ndarray, *, new_dtype: np.dtype) -> np.ndarray:
    return np.array(x, order="C").view(new_dtype)  # (ascontiguousarray makes 0-d 1-d)


rules.def_elementwise_batch(bitcast_convert_type_p)
bitcast_convert_type_p.def_sharding(elementwise_sharding)
rules.defjvp_zero(bitcast_convert_type_p)
bitcast_convert_type_p.waive("transpose", "not linear: it reinterprets bits")

_UNSIGNED = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Any:
    """``operand``'s bits as ``new_dtype``. Equal widths keep the shape; a narrower
    ``new_dtype`` adds a trailing axis of ``width ratio`` elements (lowest bits first), a
    wider one takes that axis away (its last axis must have the ratio's length)."""
    if not isinstance(new_dtype, (np.dtype, type, str)) and hasattr(new_dtype, "shape"):
        raise EmberTypeError(f"bitcast_convert_type: new_dtype must be a dtype, got an "
                             f"array of shape {np.shape(new_dtype)}; pass its .dtype")
    new_dtype = dtypes.canonicalize(new_dtype)
    source = np.dtype(getattr(operand, "dtype", None) or np.asarray(operand).dtype)
    if source == new_dtype:
        return operand
    _check_kinds(source, new_dtype)
    if source.itemsize == new_dtype.itemsize:
        return bitcast_convert_type_p.bind(operand, new_dtype=new_dtype)
    if source.itemsize > new_dtype.itemsize:
        return _split(operand, source, new_dtype)
    return _join(operand, source, new_dtype)


def _split(x: Any, source: np.dtype, target: np.dtype) -> Any:
    """Wide elements into ``ratio`` narrow ones along a new last axis, lowest first."""
    ratio = source.itemsize // target.itemsize
    wide, narrow = _UNSIGNED[source.itemsize], _UNSIGNED[target.itemsize]
    bits = bitcast_convert_type_p.bind(x, new_dtype=wide)
    shape = tuple(np.shape(bits))
    parts = []
    for position in range(ratio):
        shift = np.asarray(position * target.itemsize * 8, wide)
        piece = shift_right_logical(bits, _splat(shift, shape))
        piece = convert_element_type(bitwise_and(piece, _splat(_low_mask(wide, narrow), shape)),
                                     narrow)
        parts.append(broadcast_in_dim(piece, (*shape, 1), tuple(range(len(shape)))))
    joined = concatenate(parts, len(shape))
    return bitcast_convert_type(joined, target)


def _join(x: Any, source: np.dtype, target: np.dtype) -> Any:
    """``ratio`` narrow elements along the last axis into one wide element."""
    ratio = target.itemsize // source.itemsize
    shape = tuple(np.shape(x))
    if not shape or shape[-1] != ratio:
        raise EmberValueError(
            f"bitcast_convert_type from {source} to {target} joins {ratio} elements: the "
            f"operand's last axis must have length {ratio}, got shape {shape}")
    wide, narrow = _UNSIGNED[target.itemsize], _UNSIGNED[source.itemsize]
    bits = bitcast_convert_type(x, narrow)
    out_shape = shape[:-1]
    total = None
    for position in range(ratio):
        piece = convert_element_type(index_in_dim(bits, position, len(shape) - 1, keepdims=False), wide)
        shift = np.asarray(position * source.itemsize * 8, wide)
        piece = shift_left(piece, _splat(shift, out_shape))
        total = piece if total is None else bitwise_or(total, piece)
    return bitcast_convert_type_p.bind(total, new_dtype=target)


def _low_mask(wide: np.dtype, narrow: np.dtype) -> np.ndarray:
    return np.asarray(np.iinfo(narrow).max, wide)


def _splat(value: np.ndarray, shape: tuple[int, ...]) -> Any:
    return value if shape == () else broadcast_in_dim(value, shape, ())


def sign_bit(x: Any) -> Any:
    """Whether each float's sign bit is set (true for ``-0.0`` and negative NaNs too)."""
    width = np.dtype(x.dtype).itemsize * 8
    bits = bitcast_convert_type(x, _UNSIGNED[width // 8])
    shift = _splat(np.asarray(width - 1, bits.dtype), tuple(np.shape(bits)))
    return ne(shift_right_logical(bits, shift), _splat(np.asarray(0, bits.dtype), tuple(np.shape(bits))))
