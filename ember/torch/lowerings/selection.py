"""Lowerings of ATen's sorting, selection, scatter-reductions, cumulative and histogram
ops."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import ember
import ember.numpy as jnp
from ember import dtypes, lax
from ember.torch.lowerings.table import aten, cast, dim_index, lowers, reduction_dims
from ember.torch.promotion import Kind, is_array, promote

INDEX = np.dtype(np.int64)


def _iota(shape: tuple[int, ...], axis: int) -> Any:
    return lax.broadcasted_iota(INDEX, shape, axis)


def _is_nan(x: Any) -> Any:
    """``isnan`` that is all False for integer and bool arrays."""
    if dtypes.issubdtype(x.dtype, np.inexact):
        return jnp.isnan(x)
    return jnp.zeros(x.shape, np.bool_)


def _take(x: Any, position: Any, axis: int, keepdim: bool) -> Any:
    """``x`` at ``position`` (one index per row, shaped as ``x`` with ``axis`` of size 1)
    along ``axis``."""
    out = jnp.take_along_axis(x, position, axis=axis)
    return out if keepdim else jnp.squeeze(out, axis)


# --- sorting ----------------------------------------------------------------------------

def _sort(x: Any, axis: int, descending: bool) -> tuple[Any, Any]:
    """Stable sort along ``axis`` with NaNs largest, as ATen's: the values and their int64
    indices, equal values in their original order (descending too)."""
    if not descending:
        return lax.sort((x, _iota(x.shape, axis)), axis, is_stable=True, num_keys=1)
    # Sort the reversed axis and read it backwards: descending, ties in original order.
    values, reversed_index = lax.sort((lax.rev(x, (axis,)), _iota(x.shape, axis)), axis,
                                      is_stable=True, num_keys=1)
    last = x.shape[axis] - 1
    return lax.rev(values, (axis,)), last - lax.rev(reversed_index, (axis,))


@lowers(aten.sort.default)
def _sort_default(x: Any, dim: int = -1, descending: bool = False) -> tuple[Any, Any]:
    if x.ndim == 0:
        return x, jnp.zeros((), INDEX)
    return _sort(x, dim_index(dim, x.ndim), descending)


@lowers(aten.sort.stable)
def _sort_stable(x: Any, *, stable: bool | None = None, dim: int = -1,
                 descending: bool = False) -> tuple[Any, Any]:
    """(Every sort here is stable, as ATen's CPU sort is even when not asked to be.)"""
    return _sort_default(x, dim, descending)


@lowers(aten.topk.default)
def _topk(x: Any, k: int, dim: int = -1, largest: bool = True,
          sorted: bool = True) -> tuple[Any, Any]:
    """The ``k`` largest (or smallest) along ``dim``, sorted, equal values by index."""
    if x.ndim == 0:
        return x, jnp.zeros((), INDEX)
    axis = dim_index(dim, x.ndim)
    values, indices = _sort(x, axis, descending=largest)
    return lax.slice_in_dim(values, 0, k, axis=axis), lax.slice_in_dim(indices, 0, k, axis=axis)


@lowers(aten.kthvalue.default)
def _kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Any, Any]:
    """The ``k``-th smallest (from 1) along ``dim``, NaNs largest."""
    if x.ndim == 0:
        return x, jnp.zeros((), INDEX)
    axis = dim_index(dim, x.ndim)
    values, indices = _sort(x, axis, descending=False)
    return (lax.index_in_dim(values, k - 1, axis, keepdims=keepdim),
            lax.index_in_dim(indices, k - 1, axis, keepdims=keepdim))


def _median_position(x: Any, axis: int, ignore_nan: bool) -> Any:
    """Where ATen's (lower) median of each row sits in the row sorted with NaNs last: with
    NaNs, ``median`` gives the first NaN, ``nanmedian`` the median of the rest (the first
    NaN again when all are NaN)."""
    count = x.shape[axis]
    valid = jnp.sum(~_is_nan(x), axis=axis, keepdims=True, dtype=INDEX)
    if ignore_nan:
        return jnp.maximum((valid - 1) // 2, 0)
    return jnp.where(valid < count, valid, (count - 1) // 2)


def _median_dim(x: Any, dim: int, keepdim: bool, ignore_nan: bool) -> tuple[Any, Any]:
    if x.ndim == 0:
        return x, jnp.zeros((), INDEX)
    axis = dim_index(dim, x.ndim)
    values, indices = _sort(x, axis, descending=False)
    position = _median_position(x, axis, ignore_nan)
    return _take(values, position, axis, keepdim), _take(indices, position, axis, keepdim)


@lowers(aten.median.dim)
def _median(x: Any, dim: int, keepdim: bool = False) -> tuple[Any, Any]:
    return _median_dim(x, dim, keepdim, ignore_nan=False)


@lowers(aten.nanmedian.dim)
def _nanmedian(x: Any, dim: int, keepdim: bool = False) -> tuple[Any, Any]:
    return _median_dim(x, dim, keepdim, ignore_nan=True)


@lowers(aten.median.default)
def _median_all(x: Any) -> Any:
    return _median_dim(jnp.reshape(x, (-1,)), 0, False, ignore_nan=False)[0]


@lowers(aten.nanmedian.default)
def _nanmedian_all(x: Any) -> Any:
    return _median_dim(jnp.reshape(x, (-1,)), 0, False, ignore_nan=True)[0]


@lowers(aten.mode.default)
def _mode(x: Any, dim: int = -1, keepdim: bool = False) -> tuple[Any, Any]:
    """The most frequent value along ``dim`` (the smallest of those equally frequent) and
    the last index it occurs at, as ATen's CPU kernel: runs of equal values in the sorted
    row are counted, and the longest run's end is taken."""
    if x.ndim == 0:
        return x, jnp.zeros((), INDEX)
    axis = dim_index(dim, x.ndim)
    values, indices = _sort(x, axis, descending=False)
    count = x.shape[axis]
    position = _iota(x.shape, axis)
    earlier = lax.slice_in_dim(values, 0, count - 1, axis=axis)
    later = lax.slice_in_dim(values, 1, count, axis=axis)
    changes = earlier != later
    edge = jnp.ones_like(lax.slice_in_dim(changes, 0, 1, axis=axis))
    starts = jnp.concatenate([edge, changes], axis=axis)
    ends = jnp.concatenate([changes, edge], axis=axis)
    run_start = lax.cummax(jnp.where(starts, position, 0), axis=axis)
    run_length = jnp.where(ends, position - run_start + 1, 0)
    best = jnp.argmax(run_length, axis=axis, keepdims=True)  # (the first: smallest value)
    return _take(values, best, axis, keepdim), _take(indices, best, axis, keepdim)


# --- reductions -------------------------------------------------------------------------

@lowers(aten.max.default)
def _max_all(x: Any) -> Any:
    return jnp.max(x)


@lowers(aten.min.default)
def _min_all(x: Any) -> Any:
    return jnp.min(x)


@lowers(aten.var_mean.correction)
def _var_mean(x: Any, dim: Any = None, *, correction: Any = None,
              keepdim: bool = False) -> tuple[Any, Any]:
    axis = reduction_dims(dim, x.ndim)
    ddof = 1 if correction is None else correction
    return (jnp.var(x, axis=axis, ddof=ddof, keepdims=keepdim),
            jnp.mean(x, axis=axis, keepdims=keepdim))


# --- cumulative -------------------------------------------------------------------------

def _cumulative_extreme(x: Any, dim: int, running: Callable[..., Any]) -> tuple[Any, Any]:
    """ATen's cummax / cummin: the running extreme and the last index that attains it (a
    NaN, once seen, stays, with the index of the latest NaN)."""
    if x.ndim == 0:
        return x, jnp.zeros((), INDEX)
    axis = dim_index(dim, x.ndim)
    values = running(x, axis=axis)
    attains = (x == values) | (_is_nan(x) & _is_nan(values))
    indices = lax.cummax(jnp.where(attains, _iota(x.shape, axis), 0), axis=axis)
    return values, indices


@lowers(aten.cummax.default)
def _cummax(x: Any, dim: int) -> tuple[Any, Any]:
    return _cumulative_extreme(x, dim, lax.cummax)


@lowers(aten.cummin.default)
def _cummin(x: Any, dim: int) -> tuple[Any, Any]:
    return _cumulative_extreme(x, dim, lax.cummin)


@lowers(aten.logcumsumexp.default)
def _logcumsumexp(x: Any, dim: int) -> Any:
    """Accumulated in double for float / half inputs, as ATen's CPU kernel: its backward
    subtracts nearly equal exponentials, which a float accumulation leaves visibly off."""
    if x.ndim == 0:
        return x
    wide = np.dtype(np.float64) if dtypes.issubdtype(x.dtype, np.floating) else x.dtype
    return cast(lax.cumlogsumexp(cast(x, wide), axis=dim_index(dim, x.ndim)), x.dtype)


# --- elementwise ------------------------------------------------------------------------

@lowers(aten.round.decimals)
def _round_decimals(x: Any, *, decimals: int) -> Any:
    """Half-to-even rounding at ``decimals`` digits, scaled as ATen's kernel does."""
    if decimals == 0:
        return jnp.round(x)
    scale = jnp.asarray(10.0 ** abs(decimals), x.dtype)
    if decimals > 0:
        return jnp.round(x * scale) / scale
    return jnp.round(x / scale) * scale


@lowers(aten.frexp.Tensor)
def _frexp(x: Any) -> tuple[Any, Any]:
    mantissa, exponent = jnp.frexp(x)
    return mantissa, cast(exponent, np.dtype(np.int32))


@lowers(aten.ldexp.Tensor)
def _ldexp(x: Any, other: Any) -> Any:
    """``x * 2 ** other``, as ATen defines it, in the promoted floating dtype."""
    compute, result = promote(x, other, kind=Kind.INT_TO_FLOAT)
    return cast(cast(x, compute) * jnp.exp2(cast(other, compute)), result)


# --- scatter ----------------------------------------------------------------------------

@lowers(aten.diagonal_scatter.default)
def _diagonal_scatter(x: Any, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """``x`` with its ``aten.diagonal`` replaced by ``src`` (whose last dim is the
    diagonal's)."""
    dim1, dim2 = dim_index(dim1, x.ndim), dim_index(dim2, x.ndim)
    moved = jnp.moveaxis(x, (dim1, dim2), (-2, -1))
    length = src.shape[-1]
    rows = np.arange(length) + max(-offset, 0)
    cols = np.arange(length) + max(offset, 0)
    moved = moved.at[..., rows, cols].set(cast(src, x.dtype))
    return jnp.moveaxis(moved, (-2, -1), (dim1, dim2))


def _scatter_positions(index: Any, dim: int) -> tuple[Any, ...]:
    """The positions ``aten.scatter`` writes ``src[i]`` to: ``index[i]`` along ``dim``,
    ``i`` itself along the other dims."""
    return tuple(index if d == dim else _iota(index.shape, d) for d in range(index.ndim))


def _identity(reduce: str, dtype: np.dtype) -> Any:
    """The value that ``reduce`` leaves unchanged."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtypes.issubdtype(dtype, np.floating):
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _reduce_into(x: Any, positions: tuple[Any, ...], updates: Any, reduce: str,
                 include_self: bool) -> Any:
    """``x`` with ``updates`` reduced into it at ``positions`` by ``reduce`` (sum, prod,
    mean, amax or amin); without ``include_self`` the written positions forget ``x``."""
    updates = cast(updates, x.dtype)
    start = x if include_self else x.at[positions].set(_identity(reduce, x.dtype))
    where = start.at[positions]
    if reduce in ("sum", "mean"):
        out = where.add(updates)
    elif reduce == "prod":
        out = where.multiply(updates)
    elif reduce == "amax":
        out = where.max(updates)
    elif reduce == "amin":
        out = where.min(updates)
    else:
        raise ValueError(f"unknown reduction {reduce!r}")
    if reduce != "mean":
        return out
    counts = jnp.zeros(x.shape, x.dtype).at[positions].add(jnp.ones_like(updates))
    if include_self:
        counts = counts + 1
    counts = jnp.maximum(counts, 1)  # (positions written by none keep x)
    if dtypes.issubdtype(x.dtype, np.integer):
        return jnp.floor_divide(out, counts)
    return out / counts


@lowers(aten.scatter_reduce.two)
def _scatter_reduce(x: Any, dim: int, index: Any, src: Any, reduce: str, *,
                    include_self: bool = True) -> Any:
    if x.ndim == 0:
        flat = _scatter_reduce(jnp.reshape(x, (1,)), 0, jnp.reshape(index, (1,)),
                               jnp.reshape(src, (1,)), reduce, include_self=include_self)
        return jnp.reshape(flat, ())
    dim = dim_index(dim, x.ndim)
    src = lax.slice(src, [0] * src.ndim, list(index.shape))
    return _reduce_into(x, _scatter_positions(index, dim), src, reduce, include_self)


_SCATTER_REDUCTIONS = {"add": "sum", "multiply": "prod"}


@lowers(aten.scatter.reduce)
def _scatter_with_reduce(x: Any, dim: int, index: Any, src: Any, *, reduce: str) -> Any:
    return _scatter_reduce(x, dim, index, src, _SCATTER_REDUCTIONS[reduce])


@lowers(aten.scatter.value_reduce)
def _scatter_value_with_reduce(x: Any, dim: int, index: Any, value: Any, *,
                               reduce: str) -> Any:
    return _scatter_with_reduce(x, dim, index, jnp.full(index.shape, value, x.dtype),
                                reduce=reduce)


@lowers(aten.index_reduce.default)
def _index_reduce(x: Any, dim: int, index: Any, source: Any, reduce: str, *,
                  include_self: bool = True) -> Any:
    """``source``'s slices along ``dim`` reduced into ``x``'s slices ``index``."""
    if x.ndim == 0:
        flat = _index_reduce(jnp.reshape(x, (1,)), 0, jnp.reshape(index, (1,)),
                             jnp.reshape(source, (1,)), reduce, include_self=include_self)
        return jnp.reshape(flat, ())
    dim = dim_index(dim, x.ndim)
    positions = tuple(index if d == dim else slice(None) for d in range(x.ndim))
    return _reduce_into(x, positions, source, reduce, include_self)


@lowers(aten.put.default)
def _put(x: Any, index: Any, source: Any, accumulate: bool = False) -> Any:
    """``source`` written (or added) at ``x``'s flat (row-major) ``index``."""
    flat = jnp.reshape(x, (-1,)).at[jnp.reshape(index, (-1,))]
    values = cast(jnp.reshape(source, (-1,)), x.dtype)
    out = flat.add(values) if accumulate else flat.set(values)
    return jnp.reshape(out, x.shape)


@lowers(aten.masked_scatter.default)
def _masked_scatter(x: Any, mask: Any, source: Any) -> Any:
    """``source``'s leading elements, in order, at the positions where the (broadcast)
    ``mask`` is True."""
    x, mask = jnp.broadcast_arrays(x, mask)
    if source.size == 0:
        return x
    flat_mask = jnp.reshape(mask, (-1,))
    order = jnp.cumsum(flat_mask.astype(INDEX)) - 1  # (which source element each takes)
    taken = jnp.take(jnp.reshape(source, (-1,)), jnp.maximum(order, 0))
    out = jnp.where(flat_mask, cast(taken, x.dtype), jnp.reshape(x, (-1,)))
    return jnp.reshape(out, x.shape)


@lowers(aten.masked_scatter_backward.default)
def _masked_scatter_backward(grad_output: Any, mask: Any, sizes: list[int]) -> Any:
    """The gradient of ``masked_scatter``'s source: ``grad_output`` where ``mask`` is True,
    in order, then zeros for the source elements left unused."""
    grad_output, mask = jnp.broadcast_arrays(grad_output, mask)
    count = int(np.prod(sizes))
    flat_mask = jnp.reshape(mask, (-1,))
    order = jnp.cumsum(flat_mask.astype(INDEX)) - 1
    slot = jnp.where(flat_mask, order, count)  # (an extra slot for the unmasked)
    picked = jnp.zeros((count + 1,), grad_output.dtype).at[slot].set(
        jnp.reshape(grad_output, (-1,)))
    return jnp.reshape(picked[:count], tuple(sizes))


def _masked_put(x: Any, start: int, mask: Any, values: Any, accumulate: bool) -> Any:
    """``x[(:,) * start + (mask,)] = values`` (or ``+=``) with static shapes: the k-th
    True element of ``mask`` takes ``values``' k-th entry along the masked dim (or its only
    one, broadcast)."""
    rest = x.shape[start + mask.ndim:]
    indexed = x.shape[:start] + (-1,) + rest  # (-1: the masked dim, of the True count)
    values = jnp.reshape(values, (1,) * (len(indexed) - values.ndim) + values.shape)
    entries = values.shape[start]
    values = jnp.broadcast_to(values, x.shape[:start] + (entries,) + rest)
    order = jnp.cumsum(jnp.reshape(mask, (-1,)).astype(INDEX)) - 1
    order = jnp.reshape(jnp.clip(order, 0, entries - 1), mask.shape)
    taken = cast(jnp.take(values, order, axis=start), x.dtype)  # (shaped as x)
    where = jnp.reshape(mask, (1,) * start + mask.shape + (1,) * len(rest))
    if accumulate:
        return x + jnp.where(where, taken, jnp.zeros((), x.dtype))
    return jnp.where(where, taken, x)


@lowers(aten.index_put.default)
def _index_put(x: Any, indices: list[Any], values: Any, accumulate: bool = False) -> Any:
    """ATen's index_put: ``x`` with ``values`` put (or added) where ``indices`` (None for
    a whole dim) point; a lone boolean mask (after any None) with static shapes."""
    given = [i for i in indices if i is not None]
    start = next((d for d, i in enumerate(indices) if i is not None), 0)
    lone_mask = (len(given) == 1 and given[0].dtype == np.bool_
                 and all(i is None for i in indices[:start]))
    if lone_mask:
        return _masked_put(x, start, given[0], values, accumulate)
    where = x.at[tuple(slice(None) if i is None else i for i in indices)]
    values = cast(values, x.dtype)
    return where.add(values) if accumulate else where.set(values)


@lowers(aten.nonzero_static.default)
def _nonzero_static(x: Any, *, size: int, fill_value: int = -1) -> Any:
    """The first ``size`` nonzero elements' coordinates (row-major), the rows past the
    nonzero count filled with ``fill_value``."""
    flat = jnp.reshape(x != 0, (-1,))
    order = jnp.cumsum(flat.astype(INDEX)) - 1
    slot = jnp.where(flat & (order < size), order, size)  # (an extra row for the rest)
    if x.ndim == 0:
        coordinates = jnp.zeros((1, 0), INDEX)
    else:
        coordinates = jnp.stack([jnp.reshape(_iota(x.shape, d), (-1,))
                                 for d in range(x.ndim)], axis=-1)
    rows = jnp.full((size + 1, x.ndim), fill_value, INDEX).at[slot].set(coordinates)
    return rows[:size]


# --- searching and histograms -----------------------------------------------------------

def _search(sorted_sequence: Any, values: Any, right: bool, side: str | None,
            sorter: Any, out_int32: bool) -> Any:
    """ATen's searchsorted: each value's insertion index into the innermost rows of
    ``sorted_sequence`` (one row for all values, or one per row of ``values``)."""
    side = side if side is not None else ("right" if right else "left")
    if sorter is not None:
        sorted_sequence = jnp.take_along_axis(sorted_sequence, sorter, axis=-1)
    _, common = promote(sorted_sequence, values)
    sorted_sequence, values = cast(sorted_sequence, common), cast(values, common)
    index_dtype = np.dtype(np.int32) if out_int32 else INDEX
    if values.size == 0 or sorted_sequence.shape[-1] == 0:
        return jnp.zeros(values.shape, index_dtype)
    if sorted_sequence.ndim == 1:
        return cast(jnp.searchsorted(sorted_sequence, values, side=side), index_dtype)
    rows = jnp.reshape(sorted_sequence, (-1, sorted_sequence.shape[-1]))
    queries = jnp.reshape(values, (rows.shape[0], -1))
    found = ember.vmap(lambda row, query: jnp.searchsorted(row, query, side=side))(rows, queries)
    return cast(jnp.reshape(found, values.shape), index_dtype)


@lowers(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def _searchsorted(sorted_sequence: Any, values: Any, *, out_int32: bool = False,
                  right: bool = False, side: str | None = None, sorter: Any = None) -> Any:
    if not is_array(values):
        values = jnp.asarray(values, sorted_sequence.dtype)
    return _search(sorted_sequence, values, right, side, sorter, out_int32)


@lowers(aten.bucketize.Tensor)
def _bucketize(x: Any, boundaries: Any, *, out_int32: bool = False, right: bool = False) -> Any:
    return _search(boundaries, x, right, None, None, out_int32)


def _data_range(x: Any, low: Any, high: Any, widen: float) -> tuple[Any, Any]:
    """The outer bin edges: ``low`` and ``high`` as given unless equal, then the data's
    min and max (if any), either way apart by ``widen`` on each side if equal."""
    if low == high and x.size > 0:
        low, high = jnp.min(x), jnp.max(x)
    low, high = jnp.asarray(low, x.dtype), jnp.asarray(high, x.dtype)
    same = low == high
    return jnp.where(same, low - widen, low), jnp.where(same, high + widen, high)


@lowers(aten.histc.default)
def _histc(x: Any, bins: int = 100, min: Any = 0, max: Any = 0) -> Any:
    """Counts in ``bins`` equal bins, each element's bin interpolated as ATen's kernel
    does (no search among the edges)."""
    low, high = _data_range(x, min, max, widen=1.0)
    position = jnp.floor((x - low) * bins / (high - low)).astype(INDEX)
    position = jnp.minimum(position, bins - 1)  # (the last edge is in the last bin)
    position = jnp.where((x >= low) & (x <= high), position, bins)  # (bins: those outside)
    counts = jnp.zeros((bins + 1,), x.dtype).at[jnp.reshape(position, (-1,))].add(
        jnp.ones((x.size,), x.dtype))
    return counts[:bins]


def _linspace_edges(low: Any, high: Any, bins: int) -> Any:
    """ATen's ``linspace(low, high, bins + 1)``: the first half counted up from ``low``,
    the rest down from ``high``, so both ends are exact."""
    step = (high - low) / bins
    i = np.arange(bins + 1)
    up = low + step * jnp.asarray(i, low.dtype)
    down = high - step * jnp.asarray(bins - i, low.dtype)
    return jnp.where(jnp.asarray(i < (bins + 1) // 2), up, down)


def _histogramdd(points: Any, edges: list[Any], weight: Any, density: bool) -> Any:
    """The histogram of ``points`` (one per row of the innermost dim) in the bins between
    each dim's ``edges``: each coordinate's bin found by search among the edges (the last
    edge belongs to the last bin), points outside any dim's edges left out."""
    dims = len(edges)
    points = jnp.reshape(points, (-1, dims))
    bins = tuple(e.shape[0] - 1 for e in edges)
    flat = jnp.zeros(points.shape[:1], INDEX)
    inside = jnp.ones(points.shape[:1], np.bool_)
    for d, edge in enumerate(edges):
        coordinate = points[:, d]
        position = jnp.searchsorted(edge, coordinate, side="right") - 1
        position = jnp.minimum(position, bins[d] - 1)
        flat = flat * bins[d] + position
        inside = inside & (coordinate >= edge[0]) & (coordinate <= edge[-1])
    total = int(np.prod(bins))
    flat = jnp.where(inside, flat, total)  # (an extra bin for those outside)
    counted = jnp.ones(flat.shape, points.dtype) if weight is None \
        else cast(jnp.reshape(weight, (-1,)), points.dtype)
    hist = jnp.zeros((total + 1,), points.dtype).at[flat].add(counted)
    hist = jnp.reshape(hist[:total], bins)
    if density:
        hist = hist / jnp.sum(hist)
        for d, edge in enumerate(edges):
            widths = edge[1:] - edge[:-1]
            hist = hist / jnp.reshape(widths, (1,) * d + (-1,) + (1,) * (dims - d - 1))
    return hist


def _linear_edges(points: Any, bins: list[int], limits: Any) -> list[Any]:
    """Each dim's ``bins[d] + 1`` equally spaced edges over ``limits`` (low, high per dim)
    or else the points' min and max along that dim, apart by 1 if equal."""
    dims = points.shape[-1]
    bins = list(bins) * dims if len(bins) == 1 else list(bins)
    columns = jnp.reshape(points, (-1, dims))
    edges = []
    for d in range(dims):
        low, high = (0.0, 0.0) if limits is None else (limits[2 * d], limits[2 * d + 1])
        low, high = _data_range(columns[:, d], low, high, widen=0.5)
        edges.append(_linspace_edges(low, high, bins[d]))
    return edges


@lowers(aten.histogram.bin_ct)
def _histogram_bin_ct(x: Any, bins: int = 100, *, range: Any = None, weight: Any = None,
                      density: bool = False) -> tuple[Any, Any]:
    points = jnp.reshape(x, (-1, 1))
    edges = _linear_edges(points, [bins], range)
    return _histogramdd(points, edges, weight, density), edges[0]


@lowers(aten.histogram.bins_tensor)
def _histogram_bins_tensor(x: Any, bins: Any, *, weight: Any = None,
                           density: bool = False) -> tuple[Any, Any]:
    edges = cast(bins, x.dtype)
    return _histogramdd(jnp.reshape(x, (-1, 1)), [edges], weight, density), edges


@lowers(aten._histogramdd_bin_edges.default)
def _histogramdd_bin_edges(x: Any, bins: list[int], *, range: Any = None, weight: Any = None,
                           density: bool = False) -> list[Any]:
    return _linear_edges(x, bins, range)


@lowers(aten._histogramdd_from_bin_cts.default)
def _histogramdd_from_bin_cts(x: Any, bins: list[int], *, range: Any = None,
                              weight: Any = None, density: bool = False) -> Any:
    return _histogramdd(x, _linear_edges(x, bins, range), weight, density)


@lowers(aten._histogramdd_from_bin_tensors.default)
def _histogramdd_from_bin_tensors(x: Any, bins: list[Any], *, weight: Any = None,
                                  density: bool = False) -> Any:
    return _histogramdd(x, [cast(b, x.dtype) for b in bins], weight, density)


# --- segment reductions -----------------------------------------------------------------

_SEGMENT_REDUCTIONS = {"max": "amax", "min": "amin", "sum": "sum", "prod": "prod",
                       "mean": "sum"}


def _segment_lengths(lengths: Any, offsets: Any) -> Any:
    return lengths if lengths is not None else offsets[..., 1:] - offsets[..., :-1]


def _segment_positions(data: Any, lengths: Any, axis: int) -> tuple[Any, ...]:
    """Where each element of ``data`` goes in the (segments + 1)-long reduced axis: its
    segment along ``axis`` (the extra last one for any past the last segment's end),
    itself along the other dims."""
    ends = jnp.cumsum(lengths, axis=-1)
    element = jnp.asarray(np.arange(data.shape[axis]))
    segment = jnp.sum(ends[..., None, :] <= element[:, None], axis=-1)
    segment = jnp.reshape(segment, segment.shape + (1,) * (data.ndim - axis - 1))
    segment = jnp.broadcast_to(segment, data.shape)
    return tuple(segment if d == axis else _iota(data.shape, d) for d in range(data.ndim))


def _per_segment_shape(data: Any, lengths: Any, axis: int) -> tuple[int, ...]:
    return data.shape[:axis] + (lengths.shape[-1] + 1,) + data.shape[axis + 1:]


def _segment_counts(lengths: Any, data: Any, axis: int) -> Any:
    """Each segment's length, shaped to broadcast against the reduced ``data``."""
    return jnp.reshape(lengths, lengths.shape + (1,) * (data.ndim - axis - 1))


@lowers(aten.segment_reduce.default)
def _segment_reduce(data: Any, reduce: str, *, lengths: Any = None, indices: Any = None,
                    offsets: Any = None, axis: int = 0, unsafe: bool = False,
                    initial: Any = None) -> Any:
    """Consecutive segments of ``data`` along ``axis`` (of the given ``lengths``, or
    between ``offsets``) reduced, each from ``initial`` when given; a mean divides by the
    length, an empty segment's is ``initial`` or NaN."""
    lengths = _segment_lengths(lengths, offsets)
    axis = dim_index(axis, data.ndim)
    kind = _SEGMENT_REDUCTIONS[reduce]
    start = _identity(kind, data.dtype) if initial is None else initial
    out = _reduce_into(jnp.full(_per_segment_shape(data, lengths, axis), start, data.dtype),
                       _segment_positions(data, lengths, axis), data, kind, True)
    out = lax.slice_in_dim(out, 0, lengths.shape[-1], axis=axis)
    if reduce != "mean":
        return out
    counts = _segment_counts(lengths, data, axis)
    empty = np.nan if initial is None else initial
    return jnp.where(counts > 0, out / cast(jnp.maximum(counts, 1), data.dtype),
                     jnp.asarray(empty, data.dtype))


@lowers(aten._segment_reduce_backward.default)
def _segment_reduce_backward(grad: Any, output: Any, data: Any, reduce: str, *,
                             lengths: Any = None, offsets: Any = None, axis: int = 0,
                             initial: Any = None) -> Any:
    """ATen's CPU gradient of ``segment_reduce``: a max / min's gradient goes to every
    element equal to it (or NaN), its positive part split among them as ATen's kernel
    does; a product's to each element as the product of the others."""
    lengths = _segment_lengths(lengths, offsets)
    axis = dim_index(axis, data.ndim)
    positions = _segment_positions(data, lengths, axis)
    shape = _per_segment_shape(data, lengths, axis)

    def per_element(per_segment: Any) -> Any:
        """Each element's segment's value (zero past the last segment)."""
        padding = [(0, 0, 0)] * data.ndim
        padding[axis] = (0, 1, 0)
        return lax.pad(per_segment, jnp.zeros((), per_segment.dtype), padding)[positions]

    def segment_total(values: Any) -> Any:
        """Each element's segment's total of ``values``."""
        return jnp.zeros(shape, values.dtype).at[positions].add(values)[positions]

    grad_element = per_element(grad)
    if reduce == "sum":
        return grad_element
    if reduce == "mean":
        counts = cast(jnp.maximum(_segment_counts(lengths, data, axis), 1), data.dtype)
        return per_element(grad / counts)
    if reduce in ("max", "min"):
        chosen = _is_nan(data) | (data == per_element(output))
        count = segment_total(chosen.astype(data.dtype))
        split = jnp.where((grad_element > 0) & (count > 1), grad_element / count, grad_element)
        return jnp.where(chosen, split, jnp.zeros((), data.dtype))
    # prod: grad * output / x, or for a zero (or NaN) x the product of the others.
    special = _is_nan(data) | (data == 0)
    start = 1 if initial is None else initial
    regular = jnp.full(shape, start, data.dtype).at[positions].multiply(
        jnp.where(special, jnp.ones((), data.dtype), data))
    other_nans = segment_total(_is_nan(data).astype(INDEX)) - _is_nan(data)
    other_zeros = segment_total((data == 0).astype(INDEX)) - (data == 0)
    others = jnp.where(other_nans > 0, np.nan, jnp.where(other_zeros > 0, 0.0, 1.0))
    exclusive = regular[positions] * cast(others, data.dtype)
    return jnp.where(special, grad_element * exclusive,
                     per_element(grad * output) / jnp.where(special, 1, data))
