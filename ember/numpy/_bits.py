"""Packing booleans into the bits of bytes and back: packbits, unpackbits (as NumPy:
8 elements per ``uint8``, most significant bit first unless ``bitorder='little'``), and
``view``: an array's bits read as another dtype (the ``Array.view`` method)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._manipulation import moveaxis, ravel, reshape
from ember.numpy._promotion import broadcast_to_shape, ensure_array
from ember.numpy._reductions import sum as sum_

__all__ = ["packbits", "unpackbits"]


def _shifts(bitorder: str) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise EmberValueError(f"bitorder must be 'big' or 'little', got {bitorder!r}")
    order = np.arange(8, dtype=np.uint8)
    return order[::-1].copy() if bitorder == "big" else order


def _last_axis(x: Any, axis: int | None) -> tuple[Any, int]:
    """``x`` with ``axis`` moved last (flattened for ``axis=None``) and that axis."""
    if axis is None:
        return ravel(x), -1
    axis = canonicalize_axis(axis, x.ndim)
    return moveaxis(x, axis, -1), axis


def packbits(a: Any, axis: int | None = None, bitorder: str = "big"):
    """Each run of 8 elements along ``axis`` (the flattened array by default) as the bits
    of one ``uint8``: nonzero is 1; a last partial run is padded with zeros."""
    x = ensure_array(a)
    if not (dtypes.is_integer(x.dtype) or dtypes.is_bool(x.dtype)):
        raise EmberTypeError(f"packbits needs integers or booleans, got {x.dtype}")
    shifts = _shifts(bitorder)
    x, axis = _last_axis(x, axis)
    bits = lax.convert_element_type(lax.ne(x, broadcast_to_shape(np.zeros((), x.dtype), x.shape)),
                                    dtypes.uint8)
    n = bits.shape[-1]
    padded = -(-n // 8) * 8
    bits = lax.pad(bits, np.zeros((), dtypes.uint8), [(0, 0, 0)] * (bits.ndim - 1)
                   + [(0, padded - n, 0)])
    groups = reshape(bits, (*bits.shape[:-1], padded // 8, 8))
    weights = broadcast_to_shape(np.left_shift(np.uint8(1), shifts), groups.shape)
    packed = lax.convert_element_type(sum_(lax.mul(groups, weights), axis=-1), dtypes.uint8)
    return packed if axis == -1 else moveaxis(packed, -1, axis)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None,
               bitorder: str = "big"):
    """The bits of each ``uint8`` along ``axis`` (the flattened array by default) as 8
    elements of 0 / 1; ``count`` keeps that many (padding zeros), or drops ``-count``
    from the end."""
    x = ensure_array(a)
    if x.dtype != dtypes.uint8:
        raise EmberTypeError(f"unpackbits needs uint8 input, got {x.dtype}")
    shifts = _shifts(bitorder)
    x, axis = _last_axis(x, axis)
    expanded = lax.broadcast_in_dim(x, (*x.shape, 8), tuple(range(x.ndim)))
    bits = lax.bitwise_and(lax.shift_right_logical(expanded, broadcast_to_shape(
        shifts, expanded.shape)), broadcast_to_shape(np.uint8(1), expanded.shape))
    bits = reshape(bits, (*x.shape[:-1], x.shape[-1] * 8))
    if count is not None:
        n = bits.shape[-1]
        if count < -n:
            raise EmberValueError(f"unpackbits: count={count} drops more than the {n} bits "
                                  "along the axis")
        keep = count if count >= 0 else n + count
        if keep <= n:
            bits = lax.slice_in_dim(bits, 0, keep, axis=bits.ndim - 1)
        else:
            bits = lax.pad(bits, np.zeros((), dtypes.uint8), [(0, 0, 0)] * (bits.ndim - 1)
                           + [(0, keep - n, 0)])
    return bits if axis == -1 else moveaxis(bits, -1, axis)


def view(a: Any, dtype: Any) -> Any:
    """``a``'s bits as ``dtype``, as NumPy's and JAX's ``arr.view(dtype)``: the last axis
    grows or shrinks by the ratio of the widths (it must divide evenly); bools are bytes."""
    x = ensure_array(a)
    target = dtypes.canonicalize(dtype)
    if x.dtype == target:
        return x
    if dtypes.is_complex(x.dtype) or dtypes.is_complex(target):
        raise EmberTypeError(f"view between {x.dtype} and {target}: complex arrays are not "
                             f"supported; view their real and imaginary parts")
    if dtypes.is_bool(x.dtype):
        x = lax.convert_element_type(x, dtypes.uint8)
    wanted = dtypes.uint8 if dtypes.is_bool(target) else target
    if x.ndim == 0 and x.dtype.itemsize != wanted.itemsize:
        raise EmberValueError(f"view of a 0-d {x.dtype} array as {target}: the widths "
                              f"differ, so the array needs an axis to grow or shrink")
    if x.dtype.itemsize > wanted.itemsize:  # each element becomes several along the last axis
        out = lax.bitcast_convert_type(x, wanted)
        out = reshape(out, (*x.shape[:-1], x.shape[-1] * (x.dtype.itemsize // wanted.itemsize)))
    elif x.dtype.itemsize < wanted.itemsize:
        ratio = wanted.itemsize // x.dtype.itemsize
        if x.shape[-1] % ratio:
            raise EmberValueError(
                f"view of {x.dtype} as {target}: the last axis ({x.shape[-1]}) must be a "
                f"multiple of {ratio}")
        out = lax.bitcast_convert_type(reshape(x, (*x.shape[:-1], x.shape[-1] // ratio, ratio)),
                                       wanted)
    else:
        out = lax.bitcast_convert_type(x, wanted)
    return lax.ne(out, lax.full_like(out, 0)) if dtypes.is_bool(target) else out
