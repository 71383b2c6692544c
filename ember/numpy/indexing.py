"""Indexing: ``x[idx]``, ``x.at[idx].set/add/...`` and ``take`` / ``take_along_axis``.

``x[idx]`` follows NumPy: basic indexing (integers, slices with any step, ``None``,
``Ellipsis``) becomes static slices, reversals and reshapes; advanced indexing (integer
arrays, including traced scalars, broadcast together; NumPy's rule for where their axes
go) becomes one ``gather``. Boolean masks become integer arrays with ``nonzero``, so they
need concrete values: under ``jit`` use ``ember.numpy.where(mask, x, other)``, or
``nonzero(mask, size=...)`` for a static result size.

Out-of-bounds indices, as JAX (no error can be raised from inside compiled code):
- Reads clamp, static Python integers and index arrays alike: negative indices count from
  the end first, then the index is clamped into the axis (``arange(10.)[11]`` is 9.0,
  ``arange(10.)[-11]`` is 0.0). ``x.at[idx].get(mode='fill')`` returns ``fill_value``
  instead, NaN by default for floats. Only an integer index into an empty axis raises
  ``EmberIndexError``: there is no element to clamp to.
- Updates (``x.at[idx].set(v)`` and friends) drop out-of-bounds entries (``mode='clip'``
  clamps them instead). Repeated indices all apply for add / multiply / min / max; for
  ``set`` one of them wins.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.core.trace import Tracer
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._promotion import (
    broadcast_shapes, broadcast_to_shape, broadcasts_to, ensure_array, is_array,
)
from ember.runtime.array import Array

__all__ = ["getitem", "IndexUpdateHelper", "IndexUpdateRef", "take", "take_along_axis"]


# --- parsing an index into per-axis entries ------------------------------------------------

class _Slice(NamedTuple):
    start: int
    stop: int
    step: int


class _Advanced(NamedTuple):
    """An integer index array (NumPy array when static, else an Ember array / tracer)."""

    indices: Any


def _is_index_array(value: Any) -> bool:
    return is_array(value) or isinstance(value, (np.ndarray, list))


def _as_index_array(value: Any) -> Any:
    """Integer or bool index arrays; NumPy for static values, Ember arrays otherwise."""
    array = value if is_array(value) else np.asarray(value)
    if array.dtype == object or not (dtypes.is_integer(np.dtype(array.dtype)) or
                                     dtypes.is_bool(np.dtype(array.dtype))):
        if isinstance(array, np.ndarray) and array.size == 0:  # [] is an empty int index
            return array.astype(np.int32)
        raise EmberIndexError(f"arrays used as indices must be of integer or boolean type, "
                              f"got {array.dtype}")
    return array


def _expand(index: Any, ndim: int) -> list[Any]:
    """The index as a list with Ellipsis expanded and trailing full slices added."""
    entries = list(index) if isinstance(index, tuple) else [index]
    entries = [_as_index_array(e) if _is_index_array(e) else e for e in entries]
    consumed = sum(_consumed(e) for e in entries if e is not Ellipsis)
    if sum(e is Ellipsis for e in entries) > 1:
        raise EmberIndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise EmberIndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                              f"{consumed} were indexed")
    fill = [slice(None)] * (ndim - consumed)
    if Ellipsis in [e if e is Ellipsis else None for e in entries]:
        at = next(i for i, e in enumerate(entries) if e is Ellipsis)
        return entries[:at] + fill + entries[at + 1:]
    return entries + fill


def _consumed(entry: Any) -> int:
    """How many axes of the array an index entry uses."""
    if entry is None or isinstance(entry, (bool, np.bool_)):
        return 0
    if _is_mask(entry):
        return len(entry.shape)
    return 1


def _is_mask(entry: Any) -> bool:
    return (is_array(entry) or isinstance(entry, np.ndarray)) and dtypes.is_bool(
        np.dtype(entry.dtype))


def _static_int(entry: Any) -> bool:
    return isinstance(entry, (int, np.integer)) and not isinstance(entry, (bool, np.bool_))


def _mask_positions(mask: Any) -> np.ndarray:
    """Flat positions of the true elements of a concrete mask."""
    if isinstance(mask, Tracer):
        raise EmberIndexError(
            f"boolean mask indexing needs a concrete mask, but got a traced "
            f"{mask.aval.str_short()}: the size of the result would depend on its values. "
            "Under jit, select with ember.numpy.where(mask, x, other), or give the result a "
            "static size with ember.numpy.nonzero(mask, size=...) and index with that.")
    return np.flatnonzero(np.asarray(mask)).astype(np.int32)


def _regroup(x: Any, entries: list[Any]) -> tuple[Any, list[Any]]:
    """Turn ``None`` into new size-1 axes and each boolean mask into one axis indexed by the
    flat positions of its true elements; afterwards every entry indexes one axis."""
    shape, new_entries, axis = [], [], 0
    for entry in entries:
        if isinstance(entry, (bool, np.bool_)):
            entry = np.asarray(entry)
        if entry is None:
            shape.append(1)
            new_entries.append(slice(None))
        elif _is_mask(entry):
            size = len(entry.shape)
            mask_shape, axis_shape = tuple(entry.shape), tuple(x.shape[axis:axis + size])
            if mask_shape != axis_shape:
                raise EmberIndexError(
                    f"boolean index of shape {mask_shape} does not match the indexed axes "
                    f"{tuple(range(axis, axis + size))} of shape {axis_shape} (array shape "
                    f"{x.shape})")
            shape.append(int(np.prod(axis_shape, dtype=np.int64)))
            new_entries.append(_Advanced(_mask_positions(entry)))
            axis += size
        else:
            shape.append(x.shape[axis])
            new_entries.append(entry)
            axis += 1
    if tuple(shape) != tuple(x.shape):
        x = lax.reshape(x, shape)
    return x, new_entries


# --- basic indexing: static slices --------------------------------------------------------

def _slice_bounds(entry: slice, size: int) -> _Slice:
    for part in (entry.start, entry.stop, entry.step):
        if part is not None and not _static_int(part) and not (
                isinstance(part, Array) and part.ndim == 0):
            raise EmberIndexError(
                f"slice bounds must be static integers, got {entry!r}; for a traced start "
                "use ember.lax.dynamic_slice(x, starts, sizes) (the size must be static)")
    start, stop, step = slice(*(None if p is None else int(p) for p in (
        entry.start, entry.stop, entry.step))).indices(size)
    return _Slice(start, stop, step)


def _apply_slices(x: Any, bounds: dict[int, _Slice]) -> Any:
    """Apply static slices (any step, negative ones by reversing first) to axes."""
    reversed_axes = [axis for axis, b in bounds.items() if b.step < 0]
    if reversed_axes:
        x = lax.rev(x, reversed_axes)
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    for axis, (start, stop, step) in bounds.items():
        size = x.shape[axis]
        count = len(range(start, stop, step))
        if step < 0:
            start, step = size - 1 - start, -step
        starts[axis] = start if count else 0
        limits[axis] = start + (count - 1) * step + 1 if count else 0
        strides[axis] = step
    return lax.slice(x, starts, limits, strides)


def _clamped_int(index: int, size: int, axis: int) -> int:
    """A static integer index counted from the end when negative, then clamped (JAX)."""
    if size == 0:
        raise EmberIndexError(f"index {index} is out of bounds for axis {axis} with size 0")
    return min(max(index + size if index < 0 else index, 0), size - 1)


# --- advanced indexing: one gather ---------------------------------------------------------

def _normalized_indices(indices: Any, size: int) -> Any:
    """Integer indices with negative values counted from the end (static ones in NumPy)."""
    if isinstance(indices, np.ndarray):
        indices = indices.astype(np.int64)
        normalized = np.where(indices < 0, indices + size, indices)
        return np.clip(normalized, -1, size).astype(dtypes.default_int())  # still out of bounds
    indices = lax.convert_element_type(ensure_array(indices), dtypes.default_int())
    return lax.select_n(lax.lt(indices, 0), indices, lax.add(indices, size))


def _gather(x: Any, advanced: dict[int, Any], mode: str, fill_value: Any) -> Any:
    """Index axes ``advanced`` of ``x`` with broadcast integer arrays, NumPy placement."""
    axes = sorted(advanced)
    batch = broadcast_shapes(*[np.shape(advanced[a]) if not is_array(advanced[a])
                               else advanced[a].shape for a in axes])
    rest = [a for a in range(x.ndim) if a not in advanced]
    operand = lax.transpose(x, (*axes, *rest))
    rest_shape = tuple(x.shape[a] for a in rest)
    out_shape = batch + rest_shape
    if 0 in out_shape or 0 in x.shape:
        out = _empty_or_filled(x, out_shape, mode, fill_value)
    else:
        vectors = [broadcast_to_shape(_normalized_indices(advanced[a], x.shape[a]), batch)
                   for a in axes]
        stacked = lax.concatenate([lax.expand_dims(v, (len(batch),)) for v in vectors],
                                  len(batch))
        k = len(axes)
        dnums = lax.GatherDimensionNumbers(
            offset_dims=tuple(range(len(batch), len(out_shape))),
            collapsed_slice_dims=tuple(range(k)), start_index_map=tuple(range(k)))
        out = lax.gather(operand, stacked, dnums, (1,) * k + rest_shape, mode=mode,
                         fill_value=fill_value)
    contiguous = axes == list(range(axes[0], axes[0] + len(axes)))
    if contiguous and axes[0] > 0:  # NumPy keeps adjacent advanced axes in place
        nb, first = len(batch), axes[0]
        perm = (*range(nb, nb + first), *range(nb), *range(nb + first, len(out_shape)))
        out = lax.transpose(out, perm)
    return out


def _empty_or_filled(x: Any, shape: tuple[int, ...], mode: str, fill_value: Any) -> Any:
    """The result of a gather with nothing to read: empty, or all ``fill_value``."""
    from ember.numpy._creation import full
    from ember.ops.indexing import default_fill_value

    if 0 in shape:
        return full(shape, 0, x.dtype)
    if mode != "fill":
        raise EmberIndexError(f"cannot index into an empty axis of shape {x.shape}")
    return full(shape, default_fill_value(x.dtype) if fill_value is None else fill_value, x.dtype)


# --- getitem -------------------------------------------------------------------------------

def _split_entries(entries: list[Any], shape: tuple[int, ...], mode: str | None
                   ) -> tuple[dict[int, _Slice], list[int], dict[int, Any]]:
    """Static slices and integers (basic indexing) apart from index arrays (advanced).

    Next to an index array, or when a ``mode`` asks for its out-of-bounds handling, an
    integer is a 0-d index array: NumPy's placement rules give the same result shape.
    """
    any_array = any(isinstance(e, _Advanced) or _is_index_array(e) for e in entries)
    bounds, squeezed, advanced = {}, [], {}
    for axis, entry in enumerate(entries):
        if isinstance(entry, slice):
            bounds[axis] = _slice_bounds(entry, shape[axis])
        elif _static_int(entry):
            if mode is None and not any_array:
                start = _clamped_int(int(entry), shape[axis], axis)
                bounds[axis] = _Slice(start, start + 1, 1)
                squeezed.append(axis)
            else:
                advanced[axis] = np.asarray(entry)
        elif isinstance(entry, _Advanced) or _is_index_array(entry):
            advanced[axis] = entry.indices if isinstance(entry, _Advanced) else entry
        else:
            raise EmberIndexError(
                f"only integers, slices (':'), ellipsis ('...'), None and integer or boolean "
                f"arrays are valid indices; got {type(entry).__name__} {entry!r:.40}")
    return bounds, squeezed, advanced


def getitem(x: Any, index: Any, *, mode: str | None = None, fill_value: Any = None):
    """``x[index]`` with NumPy's semantics (see the module docstring for bounds)."""
    x = ensure_array(x)
    x, entries = _regroup(x, _expand(index, x.ndim))
    bounds, squeezed, advanced = _split_entries(entries, x.shape, mode)
    out = _apply_slices(x, bounds)
    if advanced:
        out = _gather(out, advanced, "clip" if mode is None else mode, fill_value)
    elif squeezed:
        out = lax.squeeze(out, squeezed)
    return ensure_array(out)


# --- functional updates: x.at[idx] -----------------------------------------------------

def _selects_each_element_once(index: Any) -> bool:
    """True when ``index`` has no integer index arrays (which may repeat positions)."""
    entries = index if isinstance(index, tuple) else (index,)
    return not any(_is_index_array(e) and not _is_mask(_as_index_array(e)) for e in entries)


def _scatter(x: Any, index: Any, values: Any, scatter_fn: Callable, mode: str | None,
             unique_indices: bool = False, indices_are_sorted: bool = False) -> Any:
    """Apply ``scatter_fn`` at the elements ``x[index]`` selects.

    The positions come from indexing an iota of ``x``'s flat positions with the same
    index, so updates share ``getitem``'s semantics exactly; out-of-bounds positions
    become ``x.size`` (dropped) unless ``mode='clip'``. Slices, integers and masks never
    repeat a position, so such updates are marked unique (which their gradients need).
    """
    x = ensure_array(x)
    read_mode = "clip" if mode == "clip" else "fill"
    flat_positions = lax.reshape(lax.iota(dtypes.default_int(), x.size), x.shape)
    positions = getitem(flat_positions, index, mode=read_mode, fill_value=x.size)
    updates = ensure_array(values, x.dtype)
    if not broadcasts_to(updates.shape, positions.shape):
        raise EmberValueError(f"cannot broadcast update values of shape {updates.shape} to the "
                              f"indexed shape {positions.shape}")
    if x.size == 0 or positions.size == 0:
        return x  # nothing is selected
    updates = broadcast_to_shape(updates, positions.shape)
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    out = scatter_fn(lax.reshape(x, (x.size,)), lax.reshape(positions, (positions.size, 1)),
                     lax.reshape(updates, (positions.size,)), dnums,
                     mode="clip" if mode == "clip" else "fill",
                     unique_indices=unique_indices or _selects_each_element_once(index),
                     indices_are_sorted=indices_are_sorted)
    return lax.reshape(out, x.shape)


class IndexUpdateRef:
    """``x.at[index]``: functional updates of the selected elements (JAX's ``.at``)."""

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any) -> None:
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: str | None = None, fill_value: Any = None):
        """``x[index]``; ``mode='fill'`` returns ``fill_value`` out of bounds."""
        return getitem(self.array, self.index, mode=mode, fill_value=fill_value)

    def set(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None):
        """A copy of ``x`` with ``x[index] = values``."""
        return _scatter(self.array, self.index, values, lax.scatter, mode, unique_indices,
                        indices_are_sorted)

    def add(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None):
        """A copy of ``x`` with ``x[index] += values`` (repeated indices accumulate)."""
        return _scatter(self.array, self.index, values, lax.scatter_add, mode, unique_indices,
                        indices_are_sorted)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: str | None = None):
        """A copy of ``x`` with ``x[index] *= values``."""
        return _scatter(self.array, self.index, values, lax.scatter_mul, mode, unique_indices,
                        indices_are_sorted)

    mul = multiply

    def min(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None):
        """A copy of ``x`` with ``x[index] = minimum(x[index], values)``."""
        return _scatter(self.array, self.index, values, lax.scatter_min, mode, unique_indices,
                        indices_are_sorted)

    def max(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None):
        """A copy of ``x`` with ``x[index] = maximum(x[index], values)``."""
        return _scatter(self.array, self.index, values, lax.scatter_max, mode, unique_indices,
                        indices_are_sorted)

    def divide(self, values: Any, *, mode: str | None = None):
        """A copy of ``x`` with ``x[index] /= values`` (inexact dtypes)."""
        from ember.numpy._math import true_divide

        x = ensure_array(self.array)
        if not dtypes.is_inexact(x.dtype):
            raise EmberTypeError(f".at[].divide needs an inexact dtype, got {x.dtype}")
        return self.multiply(true_divide(1, ensure_array(values, x.dtype)), mode=mode)

    def apply(self, func: Callable[[Any], Any], *, mode: str | None = None):
        """A copy of ``x`` with ``func`` applied to the selected elements."""
        return self.set(func(getitem(self.array, self.index, mode="clip")), mode=mode)


class IndexUpdateHelper:
    """What ``x.at`` returns: index it to get an ``IndexUpdateRef``."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, index: Any) -> IndexUpdateRef:
        return IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


# --- take ----------------------------------------------------------------------------------

def take(a: Any, indices: Any, axis: int | None = None, out: None = None,
         mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value: Any = None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened ``a`` if None).

    Out-of-bounds indices give ``fill_value`` (NaN for floats) by default, as JAX;
    ``mode='clip'`` clamps them, ``mode='wrap'`` wraps them around.
    """
    if out is not None:
        raise EmberValueError("take(out=...) is not supported: Ember arrays are immutable")
    x = ensure_array(a)
    if axis is None:
        x, axis = lax.reshape(x, (x.size,)), 0
    axis = canonicalize_axis(axis, x.ndim)
    index = _as_index_array(indices) if not is_array(indices) else indices
    if mode == "wrap":
        index = _wrap(index, x.shape[axis])
        mode = "clip"
    if mode == "raise":
        raise EmberValueError("take(mode='raise') is not supported (indices may be traced); "
                              "use 'fill', 'clip' or 'wrap'")
    return getitem(x, (slice(None),) * axis + (index,), mode=mode or "fill",
                   fill_value=fill_value)


def _wrap(indices: Any, size: int) -> Any:
    from ember.numpy._math import remainder

    if isinstance(indices, np.ndarray):
        return indices % size
    return remainder(indices, size)


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1, mode: str | None = None,
                    fill_value: Any = None):
    """Pick ``arr``'s elements along ``axis`` (the last by default, as the Array API has it)
    at ``indices`` (same rank as ``arr``; other axes broadcast). Out-of-bounds indices
    clamp, or give ``fill_value`` with mode='fill'."""
    x = ensure_array(arr)
    index = ensure_array(indices)
    if axis is None:
        x, axis = lax.reshape(x, (x.size,)), 0
        index = lax.reshape(index, (index.size,))
    if index.ndim != x.ndim:
        raise EmberValueError(f"take_along_axis: indices of shape {index.shape} need the same "
                              f"number of dimensions as the array of shape {x.shape}")
    if not dtypes.is_integer(index.dtype):
        raise EmberIndexError(f"take_along_axis: indices must be integers, got {index.dtype}")
    axis = canonicalize_axis(axis, x.ndim)
    shape = list(broadcast_shapes(tuple(d for i, d in enumerate(x.shape) if i != axis),
                                  tuple(d for i, d in enumerate(index.shape) if i != axis)))
    x_shape, index_shape = list(shape), list(shape)
    x_shape.insert(axis, x.shape[axis])
    index_shape.insert(axis, index.shape[axis])
    x = broadcast_to_shape(x, tuple(x_shape))
    index = _normalized_indices(broadcast_to_shape(index, tuple(index_shape)), x.shape[axis])
    if 0 in index_shape or 0 in x_shape:
        return _empty_or_filled(x, tuple(index_shape), mode or "clip", fill_value)
    others = tuple(d for d in range(x.ndim) if d != axis)
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                       start_index_map=(axis,), operand_batching_dims=others,
                                       start_indices_batching_dims=others)
    return lax.gather(x, lax.expand_dims(index, (x.ndim,)), dnums, (1,) * x.ndim,
                      mode=mode or "clip", fill_value=fill_value)
