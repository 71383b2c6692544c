"""Editing arrays element-wise by position: delete, insert, compress, choose, place, put,
put_along_axis, fill_diagonal, resize, trim_zeros.

Arrays are immutable, so the "in place" functions of NumPy (place, put, put_along_axis,
fill_diagonal) return the edited copy and, as JAX, insist on ``inplace=False``. Where
the result's shape depends on an index argument (delete, insert, trim_zeros) that
argument must be concrete; compress takes ``size=`` under jit, as ``nonzero``.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._cumulative import cumsum
from ember.numpy._joining import concatenate
from ember.numpy._manipulation import moveaxis, ravel, reshape
from ember.numpy._math import remainder, where
from ember.numpy._promotion import (
    broadcast_shapes, broadcast_to_shape, broadcasts_to, concrete, ensure_array, is_array,
    is_concrete, promote_args, sequence_arg, shape_of,
)
from ember.numpy._searching import flatnonzero
from ember.numpy.indexing import take

__all__ = ["delete", "insert", "compress", "choose", "place", "put", "put_along_axis",
           "fill_diagonal", "resize", "trim_zeros"]


def _along(arr: Any, axis: int | None) -> tuple[Any, int]:
    """``arr`` and a canonical axis (the flattened array and 0 for ``axis=None``)."""
    x = ensure_array(arr)
    if axis is None:
        return ravel(x), 0
    return x, canonicalize_axis(axis, x.ndim)


def _positions(obj: Any, n: int, name: str, upper: int) -> np.ndarray:
    """Concrete integer positions from a slice, an integer, integers or a boolean mask;
    negative ones count from the end, and all must lie in ``[-n, upper)``."""
    if isinstance(obj, slice):
        return np.arange(n)[obj]
    values = concrete(obj, f"{name}(obj=...)")
    if values.dtype == bool:
        if values.shape != (n,):
            raise EmberValueError(f"{name}: a boolean obj needs one entry per element along "
                                  f"the axis ({n}), got shape {values.shape}")
        return np.flatnonzero(values)
    if not np.issubdtype(values.dtype, np.integer) and values.size:
        raise EmberTypeError(f"{name}: obj must be integers, a slice or booleans, got "
                             f"{values.dtype}")
    bad = values[(values < -n) | (values >= upper)]
    if bad.size:
        raise EmberIndexError(f"{name}: index {int(bad.flat[0])} is out of bounds for an axis "
                              f"of size {n}")
    return np.where(values < 0, values + n, values).astype(np.int64).reshape(values.shape)


def delete(arr: Any, obj: Any, axis: int | None = None, *,
           assume_unique_indices: bool = False):
    """``arr`` without the entries ``obj`` (indices, a slice or a mask) along ``axis``
    (of the flattened array by default). With ``assume_unique_indices`` the indices may
    be traced (they must then be distinct and in range)."""
    x, axis = _along(arr, axis)
    n = x.shape[axis]
    if assume_unique_indices and is_array(obj) and not is_concrete(obj):
        drop = ravel(obj)
        kept = ensure_array(np.ones(n, bool)).at[drop].set(False)
        keep = flatnonzero(kept, size=n - drop.shape[0])
    else:
        keep = np.delete(np.arange(n), _positions(obj, n, "delete", n))
    return take(x, keep, axis=axis, mode="clip")


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None):
    """``arr`` with ``values`` inserted before the positions ``obj`` along ``axis`` (of the
    flattened array by default), as NumPy: one integer inserts a block of slices shaped
    by ``values``, several indices one slice each (broadcast from ``values``)."""
    x, axis = _along(arr, axis)
    n = x.shape[axis]
    (inserted,) = promote_args(values, dtype=x.dtype)
    inserted = reshape(inserted, (1,) * (x.ndim - inserted.ndim) + tuple(inserted.shape))
    if not isinstance(obj, slice) and not shape_of(obj):
        at = int(_positions(obj, n, "insert", n + 1))
        inserted = moveaxis(inserted, 0, axis)
        block = tuple(inserted.shape[axis] if d == axis else size
                      for d, size in enumerate(x.shape))
        inserted = _broadcast_to(inserted, block, "insert")
        return concatenate([lax.slice_in_dim(x, 0, at, axis=axis), inserted,
                            lax.slice_in_dim(x, at, n, axis=axis)], axis=axis)
    at = _positions(obj, n, "insert", n + 1)
    order = np.argsort(at, kind="stable")
    block = tuple(len(at) if d == axis else size for d, size in enumerate(x.shape))
    inserted = take(_broadcast_to(inserted, block, "insert"), order, axis=axis)
    # Every output position reads the old array or the inserted block: a static gather.
    source = np.empty(n + len(at), np.int64)
    new_positions = at[order] + np.arange(len(at))
    old = np.ones(n + len(at), bool)
    old[new_positions] = False
    source[old] = np.arange(n)
    source[new_positions] = n + np.arange(len(at))
    return take(concatenate([x, inserted], axis=axis), source, axis=axis, mode="clip")


def _broadcast_to(x: Any, shape: tuple[int, ...], name: str) -> Any:
    if not broadcasts_to(tuple(x.shape), shape):
        raise EmberValueError(f"{name}: values of shape {tuple(x.shape)} do not broadcast to "
                              f"the inserted shape {shape}")
    return broadcast_to_shape(x, shape)


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: None = None):
    """The slices of ``a`` along ``axis`` (elements of the flattened ``a`` by default)
    where the 1-D ``condition`` is true; a shorter condition counts as False beyond its
    end. Under jit pass ``size``: the result is cut or padded with ``fill_value``."""
    cond = ensure_array(condition)
    if cond.ndim != 1:
        raise EmberValueError(f"compress: condition must be 1-D, got shape {tuple(cond.shape)}")
    x, axis = _along(a, axis)
    n = x.shape[axis]
    cond = lax.ne(cond, broadcast_to_shape(np.zeros((), cond.dtype), cond.shape))
    if cond.shape[0] > n:
        extra = cond[n:]
        if is_concrete(extra) and bool(np.any(concrete(extra, "compress"))):
            raise EmberIndexError(f"compress: condition has a true entry beyond the {n} "
                                  f"entries along axis {axis}")
        cond = cond[:n]
    picked = flatnonzero(cond, size=size, fill_value=n)
    return take(x, picked, axis=axis, mode="fill", fill_value=fill_value)


def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise"):
    """Elementwise ``choices[a]``: each element from the choice that ``a`` names (all
    broadcast together). ``mode`` handles indices outside ``[0, len(choices))``:
    'raise' (``a`` must be concrete), 'wrap' or 'clip'."""
    options = [ensure_array(c) for c in sequence_arg(choices, "choose",
                                                     "a sequence of choice arrays")]
    if not options:
        raise EmberValueError("choose needs at least one choice")
    index = ensure_array(a)
    if not dtypes.is_integer(index.dtype):
        raise EmberTypeError(f"choose: a must be integers, got {index.dtype}")
    n = len(options)
    if mode == "raise":
        values = concrete(index, "choose(mode='raise')")
        if values.size and (values.min() < 0 or values.max() >= n):
            raise EmberIndexError(f"choose: an index of a is outside [0, {n}) (use "
                                  "mode='wrap' or 'clip')")
    elif mode == "wrap":
        index = remainder(index, n)
    elif mode == "clip":
        index = lax.clamp(0, index, n - 1)
    else:
        raise EmberValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    options = promote_args(*options)  # one dtype, one shape
    shape = broadcast_shapes(tuple(index.shape), tuple(options[0].shape))
    which = broadcast_to_shape(lax.convert_element_type(index, dtypes.int32), shape)
    return lax.select_n(which, *[broadcast_to_shape(o, shape) for o in options])


def _not_in_place(name: str, inplace: bool) -> None:
    if inplace:
        raise EmberValueError(f"{name}: Ember arrays are immutable, so it cannot edit in place; "
                              "pass inplace=False to get the edited copy")


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True):
    """A copy of ``arr`` whose elements where ``mask`` holds are ``vals``, used in order
    and repeated as often as needed."""
    _not_in_place("place", inplace)
    x = ensure_array(arr)
    chosen = ensure_array(mask)
    if chosen.size != x.size:
        raise EmberValueError(f"place: mask of shape {tuple(chosen.shape)} must have as many "
                              f"elements as arr of shape {tuple(x.shape)}")
    chosen = lax.ne(ravel(chosen), broadcast_to_shape(np.zeros((), chosen.dtype), (x.size,)))
    source = ravel(ensure_array(vals, x.dtype))
    if source.size == 0:
        raise EmberValueError("place: vals must not be empty")
    count = lax.sub(cumsum(lax.convert_element_type(chosen, dtypes.default_int())), 1)
    picked = take(source, remainder(count, source.size), mode="clip")
    return reshape(where(chosen, picked, ravel(x)), x.shape)


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True):
    """A copy of ``a`` with the flat positions ``ind`` set to ``v`` (repeated as needed).
    Out of range positions are dropped (``mode=None``), clipped ('clip'), wrapped
    ('wrap') or an error ('raise', concrete ``ind`` only)."""
    _not_in_place("put", inplace)
    x = ensure_array(a)
    index = ravel(ensure_array(ind))
    if not dtypes.is_integer(index.dtype):
        raise EmberTypeError(f"put: ind must be integers, got {index.dtype}")
    source = ravel(ensure_array(v, x.dtype))
    if source.size == 0 or index.size == 0:
        return x
    values = take(source, np.arange(index.size) % source.size)
    index, scatter_mode = _edit_mode("put", index, x.size, mode)
    return reshape(ravel(x).at[index].set(values, mode=scatter_mode), x.shape)


def _edit_mode(name: str, index: Any, n: int, mode: str | None) -> tuple[Any, str]:
    """Indices and the scatter mode for ``mode`` None (drop), 'clip', 'wrap', 'raise'."""
    if mode is None or mode == "drop":
        return index, "drop"
    if mode == "clip":
        return lax.clamp(0, index, n - 1), "drop"
    if mode == "wrap":
        return remainder(index, n), "drop"
    if mode == "raise":
        values = concrete(index, f"{name}(mode='raise')")
        if values.size and (values.min() < -n or values.max() >= n):
            raise EmberIndexError(f"{name}: an index is out of bounds for size {n}")
        return index, "drop"
    raise EmberValueError(f"{name}: mode must be None, 'clip', 'wrap' or 'raise', got {mode!r}")


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None,
                   inplace: bool = True, *, mode: str | None = None):
    """A copy of ``arr`` with ``values`` written at ``indices`` along ``axis`` (the
    inverse of ``take_along_axis``; other axes broadcast)."""
    _not_in_place("put_along_axis", inplace)
    x = ensure_array(arr)
    index = ensure_array(indices)
    if axis is None:
        flat = ravel(x)
        return reshape(put_along_axis(flat, ravel(index), ravel(ensure_array(values)), 0,
                                      inplace=False, mode=mode), x.shape)
    if index.ndim != x.ndim:
        raise EmberValueError(f"put_along_axis: indices of shape {tuple(index.shape)} need the "
                              f"same number of dimensions as arr of shape {tuple(x.shape)}")
    if not dtypes.is_integer(index.dtype):
        raise EmberTypeError(f"put_along_axis: indices must be integers, got {index.dtype}")
    axis = canonicalize_axis(axis, x.ndim)
    index, _ = _edit_mode("put_along_axis", index, x.shape[axis], mode)
    full = tuple(index if d == axis else
                 lax.broadcasted_iota(dtypes.default_int(), tuple(
                     size if i == d else 1 for i, size in enumerate(x.shape)), d)
                 for d in range(x.ndim))
    return x.at[full].set(values, mode="drop")


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True):
    """A copy of ``a`` with its main diagonal set to ``val`` (repeated as needed): of a 2-D
    array (continuing below the square part of a tall one with ``wrap``), or of an array
    whose dimensions are all equal."""
    _not_in_place("fill_diagonal", inplace)
    x = ensure_array(a)
    if x.ndim < 2 or (x.ndim > 2 and len(set(x.shape)) != 1):
        raise EmberValueError(f"fill_diagonal needs a 2-D array or one of equal dimensions, got "
                              f"shape {tuple(x.shape)}")
    if x.ndim == 2:
        step = x.shape[1] + 1
        end = x.size if wrap else min(x.shape[0], x.shape[1]) * x.shape[1]
    else:
        step = 1 + sum(math.prod(x.shape[:i]) for i in range(1, x.ndim))
        end = x.size
    positions = np.arange(0, end, step)
    return put(x, positions, val, inplace=False)


def resize(a: Any, new_shape: int | Sequence[int]):
    """An array of ``new_shape`` filled with ``a``'s elements, repeated in order."""
    x = ravel(ensure_array(a))
    shape = tuple(operator.index(d) for d in (new_shape if isinstance(new_shape, (list, tuple))
                                              else (new_shape,)))
    if any(d < 0 for d in shape):
        raise EmberValueError(f"resize: new_shape must not be negative, got {shape}")
    total = math.prod(shape)
    if x.size == 0:
        return ensure_array(np.zeros(shape, x.dtype))
    return reshape(take(x, np.arange(total) % x.size), shape)


def trim_zeros(filt: Any, trim: str = "fb", axis: int | Sequence[int] | None = None):
    """``filt`` without its leading ('f') and / or trailing ('b') zeros, along every axis
    (or ``axis``): the bounding box of its nonzero entries (``filt`` must be concrete)."""
    if not set(trim.lower()) <= {"f", "b"}:
        raise EmberValueError(f"trim_zeros: trim must be made of 'f' and 'b', got {trim!r}")
    x = ensure_array(filt)
    values = concrete(x, "trim_zeros")
    axes = range(x.ndim) if axis is None else [canonicalize_axis(a, x.ndim) for a in (
        axis if isinstance(axis, (list, tuple)) else (axis,))]
    trim = trim.lower()
    nonzero = np.nonzero(values)
    index = [slice(None)] * x.ndim
    for d in axes:
        found = nonzero[d]
        if not found.size:  # all zeros: nothing is left
            index[d] = slice(0, 0)
            continue
        start = int(found.min()) if "f" in trim else 0
        stop = int(found.max()) + 1 if "b" in trim else x.shape[d]
        index[d] = slice(start, stop)
    return x[tuple(index)]
