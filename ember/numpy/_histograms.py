"""Counting values into bins: bincount, digitize, histogram_bin_edges, histogram,
histogram2d, histogramdd.

Bin ``i`` holds ``edges[i] <= x < edges[i + 1]``, the last bin also its right edge, and
values outside the edges (NaN included) are not counted, as NumPy. As in JAX, counts are
floats (they are sums of weights, by default ones), integer ``bins`` need no concrete
data (the range is a traced min / max), and ``bincount`` takes a static ``length=`` under
``jit`` (negative values count as 0, values from ``length`` on are dropped).
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._creation import full, linspace
from ember.numpy._cumulative import diff
from ember.numpy._manipulation import ravel, reshape
from ember.numpy._math import true_divide, where
from ember.numpy._promotion import (
    concrete, ensure_array, inexact_dtype, is_array, is_concrete, promote_args, result_dtype,
    shape_of,
)
from ember.numpy._reductions import max as max_
from ember.numpy._reductions import min as min_
from ember.numpy._reductions import sum as sum_
from ember.numpy._searching import searchsorted
from ember.numpy._ufuncs import equal, greater_equal, less, logical_and, multiply

__all__ = ["bincount", "digitize", "histogram_bin_edges", "histogram", "histogram2d",
           "histogramdd"]


def bincount(x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None):
    """How often each non-negative integer occurs in 1-D ``x`` (or the sum of its
    ``weights``), in ``length`` bins (default: ``max(x) + 1``, at least ``minlength``;
    under ``jit`` pass ``length``)."""
    values = ensure_array(x)
    if values.ndim != 1 or not (dtypes.is_integer(values.dtype)
                                or dtypes.is_bool(values.dtype)):
        raise EmberTypeError(f"bincount needs a 1-D integer array, got "
                             f"{values.aval.str_short()}")
    if length is None:
        top = concrete(max_(values, initial=-1), "bincount without length=")
        length = builtins.max(int(top) + 1, operator.index(minlength))
    length = operator.index(length)
    bins = lax.clamp(0, lax.convert_element_type(values, dtypes.default_int()), length)
    if weights is None:
        return full((length,), 0, dtypes.default_int()).at[bins].add(1, mode="drop")
    (w,) = promote_args(weights)
    if w.shape != values.shape:
        raise EmberValueError(f"bincount: weights must have the shape of x {values.shape}, "
                              f"got {w.shape}")
    total = dtypes.default_int() if not dtypes.is_inexact(w.dtype) else w.dtype
    return full((length,), 0, total).at[bins].add(w, mode="drop")


def digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None):
    """The index of the bin of each ``x``: ``i`` such that ``bins[i-1] <= x < bins[i]``
    (``<`` and ``<=`` swap with ``right=True``) for increasing ``bins``, mirrored for
    decreasing ones; 0 below the first edge, ``len(bins)`` beyond the last."""
    edges = ensure_array(bins)
    if edges.ndim != 1:
        raise EmberValueError(f"digitize: bins must be 1-D, got shape {edges.shape}")
    values = ensure_array(x, result_dtype(x, edges))
    if edges.shape[0] == 0:
        return full(values.shape, 0, dtypes.default_int())
    edges = ensure_array(edges, values.dtype)
    side = "left" if right else "right"
    increasing = searchsorted(edges, values, side)
    decreasing = lax.sub(edges.shape[0], searchsorted(lax.rev(edges, (0,)), values, side))
    return where(lax.ge(edges[-1], edges[0]), increasing, decreasing)


def _bin_count(bins: Any) -> int | None:
    """``bins`` as a number of equal bins, or None for explicit edges."""
    if isinstance(bins, str):
        raise EmberValueError(f"histogram: bins={bins!r}: estimators by name are not "
                              "supported; pass a number of bins or the edges")
    if shape_of(bins):
        return None
    count = operator.index(concrete(bins, "histogram(bins=...)").item())
    if count < 1:
        raise EmberValueError(f"histogram: bins must be positive, got {count}")
    return count


def _range(values: Any, value_range: Any) -> tuple[Any, Any]:
    """The first and last edge: ``value_range`` or the data's extremes (0 and 1 for no
    data), widened by 0.5 on both sides where they are equal (as NumPy)."""
    if value_range is None:
        if values.size == 0:
            return 0.0, 1.0
        low, high = min_(values), max_(values)
    else:
        if len(value_range) != 2:
            raise EmberValueError(f"histogram: range must be (min, max), got {value_range!r}")
        low, high = value_range
        if not any(_is_traced(v) for v in (low, high)) and np.asarray(low) > np.asarray(high):
            raise EmberValueError(f"histogram: range max must not be below min, got "
                                  f"{value_range!r}")
    low, high = promote_args(low, high, dtype=values.dtype)
    same = lax.eq(low, high)
    return where(same, lax.sub(low, 0.5), low), where(same, lax.add(high, 0.5), high)


def _is_traced(value: Any) -> bool:
    return is_array(value) and not is_concrete(value)


def _edges(values: Any, bins: Any, value_range: Any) -> Any:
    count = _bin_count(bins)
    if count is None:
        edges = ensure_array(bins, values.dtype)
        if edges.ndim != 1 or edges.shape[0] < 2:
            raise EmberValueError(f"histogram: bin edges must be 1-D with at least 2 entries, "
                                  f"got shape {edges.shape}")
        return edges
    low, high = _range(values, value_range)
    return linspace(low, high, count + 1, dtype=values.dtype)


def _float_values(a: Any, weights: Any = None) -> Any:
    x = ensure_array(a)
    dtype = inexact_dtype(x.dtype if weights is None else result_dtype(x, weights))
    if dtypes.is_complex(dtype):
        raise EmberTypeError(f"histogram of complex values ({x.dtype}) is not defined")
    return lax.convert_element_type(ravel(x), dtype)


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None):
    """The edges ``histogram`` uses: ``bins + 1`` equally spaced ones over ``range``
    (default: the data's min and max), or ``bins`` itself when it is an array."""
    return _edges(_float_values(a), bins, range)


def _bin_index(values: Any, edges: Any) -> Any:
    """Each value's bin; ``len(edges) - 1`` (no bin) outside the edges."""
    nbins = edges.shape[0] - 1
    index = lax.sub(searchsorted(edges, values, side="right"), 1)
    index = where(equal(values, edges[-1]), nbins - 1, index)
    return where(logical_and(greater_equal(index, 0), less(index, nbins)), index, nbins)


def _counts(flat_bins: Any, weights: Any, length: int, dtype: np.dtype, n: int) -> Any:
    if weights is None:
        weights = full((n,), 1, dtype)
    w = ravel(ensure_array(weights, dtype))
    if w.shape != (n,):
        raise EmberValueError(f"histogram: weights must have one entry per value ({n}), got "
                              f"shape {shape_of(weights)}")
    return full((length,), 0, dtype).at[flat_bins].add(w, mode="drop")


def histogram(a: Any, bins: Any = 10, range: Any = None, weights: Any = None,
              density: bool | None = None) -> tuple[Any, Any]:
    """Counts (or summed ``weights``) of the values of ``a`` in each bin, and the bin
    edges (see ``histogram_bin_edges``); ``density=True`` scales the counts so that they
    integrate to 1 over the range."""
    values = _float_values(a, weights)
    edges = _edges(values, bins, range)
    nbins = edges.shape[0] - 1
    counts = _counts(_bin_index(values, edges), weights, nbins, values.dtype, values.shape[0])
    if density:
        counts = true_divide(counts, multiply(sum_(counts), diff(edges)))
    return counts, edges


def _per_dimension(value: Any, d: int, name: str) -> list[Any]:
    """One entry of ``bins`` or ``range`` per dimension (a lone count serves all)."""
    if value is None or (name == "bins" and not isinstance(value, (list, tuple))
                         and not shape_of(value)):
        return [value] * d
    items = list(value)
    if len(items) != d:
        raise EmberValueError(f"histogramdd: {name} needs one entry per dimension ({d}), got "
                              f"{len(items)}")
    return items


def histogramdd(sample: Any, bins: Any = 10, range: Sequence[Any] | None = None,
                weights: Any = None, density: bool | None = None) -> tuple[Any, list]:
    """The histogram of ``N`` points in ``D`` dimensions (``sample`` of shape ``(N, D)``):
    counts of shape ``(bins_1, ..., bins_D)`` and the edges of each dimension. ``bins``
    is one count, or one count or edge array per dimension; ``range`` one ``(min, max)``
    (or None) per dimension."""
    points = ensure_array(sample)
    if points.ndim == 1:
        points = reshape(points, (-1, 1))
    if points.ndim != 2:
        raise EmberValueError(f"histogramdd: sample must be (N, D), got shape {points.shape}")
    n, d = points.shape
    dtype = inexact_dtype(points.dtype if weights is None else result_dtype(points, weights))
    columns = [lax.convert_element_type(points[:, i], dtype) for i in builtins.range(d)]
    edges = [_edges(c, b, r) for c, b, r in zip(columns, _per_dimension(bins, d, "bins"),
                                                _per_dimension(range, d, "range"))]
    shape = tuple(e.shape[0] - 1 for e in edges)
    flat = ensure_array(np.zeros(n, dtypes.default_int()))
    outside = ensure_array(np.zeros(n, bool))
    for column, e, size in zip(columns, edges, shape):
        index = _bin_index(column, e)
        outside = lax.bitwise_or(outside, lax.eq(index, size))
        flat = lax.add(lax.mul(flat, size), index)
    flat = where(outside, math.prod(shape), flat)
    counts = reshape(_counts(flat, weights, math.prod(shape), dtype, n), shape)
    if density:
        counts = true_divide(counts, sum_(counts))
        for axis, e in enumerate(edges):
            width = lax.broadcast_in_dim(diff(e), shape, (axis,))
            counts = lax.div(counts, width)
    return counts, edges


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Sequence[Any] | None = None,
                weights: Any = None, density: bool | None = None) -> tuple[Any, Any, Any]:
    """The 2-D histogram of the points ``(x[i], y[i])``: counts of shape ``(nx, ny)``
    and the edges along x and y (``bins``: a count, a pair of counts, one edge array for
    both, or a pair of edge arrays)."""
    from ember.numpy._joining import stack

    count = len(bins) if isinstance(bins, (list, tuple)) or shape_of(bins) else 1
    if count not in (1, 2):  # one edge array for both axes (as NumPy)
        bins = [bins, bins]
    counts, (x_edges, y_edges) = histogramdd(stack([ravel(x), ravel(y)], axis=1), bins, range,
                                             weights, density)
    return counts, x_edges, y_edges
