"""Set functions: unique (and the Array API unique_all / counts / inverse / values),
isin, union1d, intersect1d, setdiff1d.

All are one sort plus masks. How many unique values there are depends on the data, so
eagerly the count is read from the values, and under ``jit`` ``size=`` fixes it (extra
slots hold ``fill_value``, by default the smallest value), as in JAX.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._joining import concatenate
from ember.numpy._axes import canonicalize_axis
from ember.numpy._manipulation import moveaxis, ravel, reshape
from ember.numpy._math import where
from ember.numpy._promotion import broadcast_to_shape, concrete, ensure_array
from ember.numpy._searching import flatnonzero
from ember.numpy.indexing import take

__all__ = ["unique", "unique_all", "unique_counts", "unique_inverse", "unique_values", "isin",
           "union1d", "intersect1d", "setdiff1d", "setxor1d"]


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def _first_of_runs(sorted_rows: Any, equal_nan: bool) -> Any:
    """bool mask: True where a row of the sorted ``(n, k)`` matrix differs from the one
    before it."""
    from ember.numpy._reductions import any as any_

    upper, lower = sorted_rows[1:], sorted_rows[:-1]
    differs = lax.ne(upper, lower)
    if equal_nan and dtypes.is_inexact(sorted_rows.dtype):
        both_nan = lax.bitwise_and(lax.ne(upper, upper), lax.ne(lower, lower))
        differs = lax.bitwise_and(differs, lax.bitwise_not(both_nan))
    return concatenate([np.ones(1, bool), any_(differs, axis=1)])


def _as_rows(x: Any, axis: int | None) -> tuple[Any, int | None]:
    """``x`` as an ``(n, k)`` matrix whose rows are the items to compare: its elements
    (``axis=None``) or its slices along ``axis``; and the canonical axis."""
    if axis is None:
        return reshape(x, (-1, 1)), None
    if x.ndim == 0:
        raise EmberValueError("unique(axis=...) of a 0-d array: it has no axes (use axis=None)")
    axis = canonicalize_axis(axis, x.ndim)
    return reshape(moveaxis(x, axis, 0), (x.shape[axis], x.size // max(x.shape[axis], 1))), axis


def _sort_rows(rows: Any) -> Any:
    """The permutation that sorts the rows lexicographically (stable; NaNs last)."""
    n, k = rows.shape
    positions = lax.iota(dtypes.default_int(), n)
    if k == 0:
        return positions
    columns = [rows[:, j] for j in range(k)]
    return lax.sort((*columns, positions), 0, is_stable=True, num_keys=k)[-1]


def _from_rows(rows: Any, x: Any, axis: int | None) -> Any:
    """Rows of ``x``'s items back in ``x``'s layout: 1-D, or stacked along ``axis``."""
    if axis is None:
        return reshape(rows, (-1,))
    items = reshape(rows, (rows.shape[0], *x.shape[:axis], *x.shape[axis + 1:]))
    return moveaxis(items, 0, axis)


def _unique(x: Any, equal_nan: bool, size: int | None, fill_value: Any,
            axis: int | None = None) -> UniqueAllResult:
    x = ensure_array(x)
    rows, axis = _as_rows(x, axis)
    n = rows.shape[0]
    index_dtype = dtypes.default_int()
    inverse_shape = x.shape if axis is None else (n,)
    if n == 0:
        empty = ensure_array(np.zeros(0, index_dtype))
        return UniqueAllResult(_from_rows(rows, x, axis), empty,
                               lax.reshape(empty, inverse_shape), empty)
    order = _sort_rows(rows)
    sorted_rows = take(rows, order, axis=0, mode="clip")
    first = _first_of_runs(sorted_rows, equal_nan)
    if size is None:
        size = int(concrete(lax.reduce_sum(lax.convert_element_type(first, index_dtype), (0,)),
                            "unique without size="))
    bounds = flatnonzero(first, size=size + 1, fill_value=n)  # one more: the last end
    starts = bounds[:size]
    missing = lax.eq(starts, broadcast_to_shape(np.asarray(n, index_dtype), starts.shape))
    fill = sorted_rows[0] if fill_value is None else fill_value
    values = where(missing[:, None], fill, take(sorted_rows, starts, axis=0, mode="clip"))
    counts = lax.sub(bounds[1:], starts)
    indices = take(order, starts, mode="clip")
    indices = where(missing, indices[0], indices)  # as JAX: padding repeats the first index
    groups = lax.sub(lax.cumsum(lax.convert_element_type(first, index_dtype), 0),
                     broadcast_to_shape(np.ones((), index_dtype), (n,)))
    inverse = ensure_array(np.zeros(n, index_dtype)).at[order].set(groups)
    values = _from_rows(lax.convert_element_type(values, x.dtype), x, axis)
    return UniqueAllResult(values, indices, lax.reshape(inverse, inverse_shape), counts)


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value: Any = None):
    """Sorted unique elements of the flattened ``ar``, or with ``axis`` its unique slices
    along that axis (sorted lexicographically), as NumPy's ``unique``.

    ``return_index``: where each first occurs; ``return_inverse``: which unique value each
    element (or slice) is, in ``ar``'s shape (``(n,)`` with ``axis``); ``return_counts``:
    how often each occurs. NaNs count as one value unless ``equal_nan=False`` (with
    ``axis`` too, as JAX). Under jit pass ``size=``: the result is cut or padded to
    ``size`` entries, padding values ``fill_value`` (default: the smallest value), counts
    0 and indices the first index.
    """
    result = _unique(ar, equal_nan, size, fill_value, axis)
    extras = [value for flag, value in ((return_index, result.indices),
                                        (return_inverse, result.inverse_indices),
                                        (return_counts, result.counts)) if flag]
    return (result.values, *extras) if extras else result.values


def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueAllResult:
    """Unique values, first indices, inverse indices (shape of ``x``) and counts; each NaN
    is its own value (Array API)."""
    return _unique(x, False, size, fill_value)


def unique_counts(x: Any, /, *, size: int | None = None,
                  fill_value: Any = None) -> UniqueCountsResult:
    result = _unique(x, False, size, fill_value)
    return UniqueCountsResult(result.values, result.counts)


def unique_inverse(x: Any, /, *, size: int | None = None,
                   fill_value: Any = None) -> UniqueInverseResult:
    result = _unique(x, False, size, fill_value)
    return UniqueInverseResult(result.values, result.inverse_indices)


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None):
    return _unique(x, False, size, fill_value).values


def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False):
    """Whether each element of ``element`` occurs in ``test_elements`` (compares all pairs)."""
    from ember.numpy._reductions import any as any_

    x = ensure_array(element)
    tests = ravel(test_elements)
    found = any_(lax.eq(*_pairs(x, tests)), axis=-1)
    return lax.bitwise_not(found) if invert else found


def _pairs(x: Any, tests: Any) -> tuple[Any, Any]:
    """``x`` and ``tests`` (1-D) broadcast against each other on a new last axis."""
    x, tests = _common(x, tests)
    shape = (*x.shape, tests.shape[0])
    return (lax.broadcast_in_dim(x, shape, tuple(range(x.ndim))),
            lax.broadcast_in_dim(tests, shape, (x.ndim,)))


def _common(x: Any, y: Any) -> tuple[Any, Any]:
    from ember.numpy._promotion import result_dtype

    dtype = result_dtype(x, y)
    return ensure_array(x, dtype), ensure_array(y, dtype)


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None):
    """Sorted unique elements of both arrays."""
    return unique(concatenate([ravel(ar1), ravel(ar2)]), size=size, fill_value=fill_value)


def _positions(keep: Any, size: int | None, name: str) -> tuple[Any, Any]:
    """Where ``keep`` holds: eagerly all of them, under jit the first ``size`` (padding
    positions point past the end); and which positions are padding."""
    n = keep.shape[0]
    if size is None:
        positions = ensure_array(np.flatnonzero(concrete(keep, f"{name} without size=")))
    else:
        positions = flatnonzero(keep, size=size, fill_value=n)
    return positions, lax.eq(positions, broadcast_to_shape(np.asarray(n, positions.dtype),
                                                           positions.shape))


def _selected(values: Any, keep: Any, size: int | None, fill_value: Any, name: str) -> Any:
    """``values[keep]`` (see ``_positions``), padding ``fill_value``, by default the first
    value kept."""
    positions, missing = _positions(keep, size, name)
    picked = take(values, positions, mode="clip")
    if size is None:
        return picked
    return where(missing, picked[0] if fill_value is None else fill_value, picked)


def _unique_of(ar: Any) -> UniqueAllResult:
    """The unique values of the flattened ``ar`` in ``len(ar)`` slots (so that it works
    under jit); padding slots have count 0."""
    x = ravel(ar)
    return _unique(x, True, x.shape[0], None)


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False,
                *, size: int | None = None, fill_value: Any = None):
    """Sorted unique elements found in both arrays; with ``return_indices`` also where
    each first occurs in ``ar1`` and ``ar2``. Under jit pass ``size``."""
    first = _unique_of(ar1)
    keep = lax.bitwise_and(lax.gt(first.counts, 0), isin(first.values, ar2))
    values = _selected(first.values, keep, size, fill_value, "intersect1d")
    if not return_indices:
        return values
    from ember.numpy._searching import argmax

    # As JAX, padding slots get the lengths of ar1 and ar2 as their indices.
    positions, missing = _positions(keep, size, "intersect1d")
    second = ravel(ar2)
    in_first = where(missing, first.values.shape[0], take(first.indices, positions,
                                                          mode="clip"))
    in_second = where(missing, second.shape[0],
                      argmax(lax.eq(*_pairs(values, second)), axis=-1))
    return values, in_first, in_second


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None):
    """Sorted unique elements of ``ar1`` not in ``ar2``. Under jit pass ``size``."""
    first = _unique_of(ar1)
    keep = lax.bitwise_and(lax.gt(first.counts, 0), isin(first.values, ar2, invert=True))
    return _selected(first.values, keep, size, fill_value, "setdiff1d")


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None):
    """Sorted unique elements in exactly one of the two arrays. Under jit pass ``size``:
    the result is cut or padded with ``fill_value`` (default: its smallest value)."""
    a, b = ravel(ar1), ravel(ar2)
    both = concatenate([a, b])
    n = both.shape[0]
    if n == 0:
        return both
    groups = _unique(both, False, n, None)  # n slots: never cut, so the inverse is exact
    seen = ensure_array(np.zeros(n, bool))
    in_a = seen.at[groups.inverse_indices[:a.shape[0]]].set(True)
    in_b = seen.at[groups.inverse_indices[a.shape[0]:]].set(True)
    exclusive = lax.bitwise_xor(in_a, in_b)  # padding slots are in neither
    return _selected(groups.values, exclusive, size, fill_value, "setxor1d")
