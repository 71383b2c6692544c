"""Searching: argmax / argmin, nonzero / argwhere / flatnonzero, searchsorted.

``nonzero`` and friends return as many indices as there are nonzero elements, a number
that is only known from the values: eagerly that is fine, under ``jit`` pass ``size=``
(extra slots get ``fill_value``, 0 by default), as in JAX.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._manipulation import ravel
from ember.numpy._promotion import (
    broadcast_to_shape, concrete, constant_like, ensure_array, promote_args,
)

__all__ = ["argmax", "argmin", "nanargmax", "nanargmin", "nonzero", "flatnonzero", "argwhere",
           "searchsorted", "extract"]


def _arg_extremum(lax_fn, a: Any, axis: int | None, keepdims: bool) -> Any:
    x = ensure_array(a)
    if dtypes.is_bool(x.dtype):
        x = lax.convert_element_type(x, dtypes.int8)
    if axis is None:
        out = lax_fn(ravel(x), 0, dtypes.default_int())
        return lax.reshape(out, (1,) * x.ndim) if keepdims else out
    axis = canonicalize_axis(axis, x.ndim)
    out = lax_fn(x, axis, dtypes.default_int())
    if keepdims:
        out = lax.expand_dims(out, (axis,))
    return out


def argmax(a: Any, axis: int | None = None, out: None = None, keepdims: bool = False):
    """Index of the largest element along ``axis`` (of the flattened array if None); the
    first one on ties; NaN counts as largest."""
    return _arg_extremum(lax.argmax, a, axis, keepdims)


def argmin(a: Any, axis: int | None = None, out: None = None, keepdims: bool = False):
    """Index of the smallest element along ``axis``; the first one on ties; NaN counts as
    smallest."""
    return _arg_extremum(lax.argmin, a, axis, keepdims)


def _nan_arg(fn, replacement: float, a: Any, axis: int | None, keepdims: bool) -> Any:
    from ember.numpy._math import isnan, where

    (x,) = promote_args(a)
    if dtypes.is_floating(x.dtype):
        x = where(isnan(x), replacement, x)
    return fn(x, axis, keepdims=keepdims)


def nanargmax(a: Any, axis: int | None = None, out: None = None, keepdims: bool = False):
    return _nan_arg(argmax, -np.inf, a, axis, keepdims)


def nanargmin(a: Any, axis: int | None = None, out: None = None, keepdims: bool = False):
    return _nan_arg(argmin, np.inf, a, axis, keepdims)


def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple:
    """Indices of the nonzero elements, one integer array per axis.

    Without ``size`` the input must be concrete (eager); with ``size`` the result has
    exactly ``size`` entries (truncated, or padded with ``fill_value``).
    """
    x = ensure_array(a)
    if x.ndim == 0:
        raise EmberValueError("nonzero of a 0-d array is not defined; use atleast_1d(x) first")
    mask = lax.ne(x, broadcast_to_shape(np.zeros((), x.dtype), x.shape))
    if size is None:
        positions = concrete(mask, "nonzero (or boolean indexing) without size=")
        return tuple(ensure_array(i, dtypes.default_int()) for i in np.nonzero(positions))
    flat = _kth_true_positions(ravel(mask), int(size))
    return _unravel(flat, x.shape, x.size, fill_value)


def _kth_true_positions(mask: Any, size: int) -> Any:
    """Flat positions of the first ``size`` true elements; ``len(mask)`` where none is left."""
    from ember.numpy._cumulative import cumsum

    running = cumsum(lax.convert_element_type(mask, dtypes.default_int()))
    wanted = lax.add(lax.iota(dtypes.default_int(), size), 1)
    return searchsorted(running, wanted, side="left")


def _unravel(flat: Any, shape: tuple[int, ...], total: int, fill_value: Any) -> tuple:
    from ember.numpy._math import where

    fills = fill_value if isinstance(fill_value, (tuple, list)) else (
        (0 if fill_value is None else fill_value),) * len(shape)
    if len(fills) != len(shape):
        raise EmberValueError(f"nonzero: fill_value needs one value per axis ({len(shape)}), "
                              f"got {fill_value!r}")
    missing = lax.eq(flat, broadcast_to_shape(np.asarray(total, flat.dtype), flat.shape))
    indices, stride = [], total
    for dim, fill in zip(shape, fills):
        stride //= max(dim, 1)
        index = lax.rem(lax.div(flat, max(stride, 1)), max(dim, 1))
        indices.append(lax.convert_element_type(where(missing, fill, index),
                                                dtypes.default_int()))
    return tuple(indices)


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None):
    """Indices of the nonzero elements of the flattened array."""
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None):
    """Indices of the nonzero elements as an ``(N, ndim)`` array."""
    from ember.numpy._joining import stack

    x = ensure_array(a)
    if x.ndim == 0:
        found = int(concrete(x, "argwhere").astype(bool)) if size is None else size
        return ensure_array(np.zeros((found, 0), dtypes.default_int()))
    return stack(nonzero(x, size=size, fill_value=fill_value), axis=1)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0):
    """Elements of ``arr`` where ``condition`` is true (flattened)."""
    from ember.numpy.indexing import take

    positions = flatnonzero(condition, size=size, fill_value=-1)
    return take(ravel(arr), positions, mode="fill", fill_value=fill_value)


def _sort_less(x: Any, y: Any) -> Any:
    """``x < y`` in sort order: NaN is larger than every number."""
    less = lax.lt(x, y)
    if not dtypes.is_floating(x.dtype):
        return less
    y_nan, x_nan = lax.ne(y, y), lax.ne(x, x)
    return lax.bitwise_or(less, lax.bitwise_and(y_nan, lax.bitwise_not(x_nan)))


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *,
                 method: str = "scan"):
    """Where ``v`` would be inserted into the sorted 1-D ``a`` to keep it sorted.

    A binary search unrolled at trace time: ``ceil(log2(len(a) + 1))`` rounds, each one
    gather and a comparison (NaNs sort last, as NumPy).
    """
    from ember.numpy.indexing import take

    if side not in ("left", "right"):
        raise EmberValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    sorted_a = ensure_array(a)
    if sorted_a.ndim != 1:
        raise EmberValueError(f"searchsorted needs a 1-D sorted array, got shape {sorted_a.shape}")
    if sorter is not None:
        sorted_a = take(sorted_a, sorter, mode="clip")
    sorted_a, values = _promote_pair(sorted_a, v)
    n = sorted_a.shape[0]
    index_dtype = dtypes.default_int()
    low = broadcast_to_shape(np.zeros((), index_dtype), values.shape)
    high = broadcast_to_shape(np.asarray(n, index_dtype), values.shape)
    for _ in range(math.ceil(math.log2(n + 1))):
        middle = lax.shift_right_logical(lax.add(low, high), constant_like(1, low))
        probe = take(sorted_a, middle, mode="clip")
        if side == "left":
            go_right = _sort_less(probe, values)
        else:
            go_right = lax.bitwise_not(_sort_less(values, probe))
        active = lax.lt(low, high)
        low = lax.select_n(lax.bitwise_and(active, go_right), low,
                           lax.add(middle, constant_like(1, middle)))
        high = lax.select_n(lax.bitwise_and(active, lax.bitwise_not(go_right)), high, middle)
    return ensure_array(low)


def _promote_pair(a: Any, v: Any) -> tuple[Any, Any]:
    from ember.numpy._promotion import result_dtype

    common = result_dtype(a, v)
    return ensure_array(a, common), ensure_array(v, common)
