"""Shape-changing and slicing primitives (the ``jax.lax`` structural set).

Static reshaping: broadcast_in_dim, reshape, transpose, squeeze, rev, pad, concatenate,
iota, slice. Dynamic slicing: dynamic_slice and dynamic_update_slice, whose start
indices are scalar operands clamped into range as XLA does (so a slice never reads or
writes outside its array). All of them are linear in their array operands; their jvp is
the op applied to tangents and each has a transpose rule. Batching moves the batch
axis to the front; dynamic slices with batched indices become gathers / scatters.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError, ShapeError
from ember.ops.sharding_rules import ShardingDecision, ShardingQuery, identity_map, mapped_sharding
from ember.ops.rules import (
    batch_size, deflinear, is_undefined_primal, move_batch_axis, zeros_like_aval)

__all__ = [
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "rev", "pad",
    "concatenate", "iota", "broadcasted_iota", "slice", "dynamic_slice",
    "dynamic_update_slice", "slice_in_dim", "index_in_dim", "dynamic_slice_in_dim",
    "dynamic_index_in_dim", "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim",
]


# --- shared helpers -------------------------------------------------------------------

def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def canonical_axis(axis: int, ndim: int, op: str) -> int:
    """``axis`` as a non-negative int; negative axes count from the end."""
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise EmberIndexError(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def canonical_axes(axes: Sequence[int], ndim: int, op: str) -> tuple[int, ...]:
    """Distinct axes, each made non-negative (order kept)."""
    result = tuple(canonical_axis(a, ndim, op) for a in axes)
    if len(set(result)) != len(result):
        raise EmberValueError(f"{op}: repeated axis in {tuple(axes)}")
    return result


def _aval_shape(x: Any) -> tuple[int, ...]:
    return aval_of(x).shape


def _at_front(x: Any, dim: int | None, size: int) -> Any:
    return move_batch_axis(x, dim, 0, size)


def _def_front_batch(prim: Primitive, batched_params: Callable[..., dict]) -> None:
    """Batch a one-operand primitive by moving the batch axis to the front.

    ``batched_params(size, **params)`` gives the params for the operand with its new
    leading axis of ``size``; the output's batch axis is 0.
    """

    def rule(values: Sequence[Any], dims: Sequence[int | None], **params: Any):
        (x,), (dim,) = values, dims
        size = np.shape(x)[dim]
        return prim.bind(_at_front(x, dim, size), **batched_params(size, **params)), 0

    prim.def_batch(rule)


def _shifted(axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(a + 1 for a in axes)


# --- broadcast_in_dim -----------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_abstract(x: ShapedArray, *, shape: tuple[int, ...],
                        broadcast_dimensions: tuple[int, ...]) -> ShapedArray:
    if len(broadcast_dimensions) != x.ndim:
        raise EmberValueError(f"broadcast_in_dim: {x.ndim}-d operand needs {x.ndim} "
                              f"broadcast_dimensions, got {broadcast_dimensions}")
    if any(a >= b for a, b in zip(broadcast_dimensions, broadcast_dimensions[1:])):
        raise EmberValueError(f"broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} "
                              "must be strictly increasing")
    for in_dim, out_dim in enumerate(broadcast_dimensions):
        if not 0 <= out_dim < len(shape) or x.shape[in_dim] not in (1, shape[out_dim]):
            raise EmberValueError(f"broadcast_in_dim: cannot broadcast shape {x.shape} to "
                                  f"{shape} along dimensions {broadcast_dimensions}")
    return ShapedArray(shape, x.dtype)


@broadcast_in_dim_p.def_impl
def _broadcast_impl(x, *, shape, broadcast_dimensions):
    x = np.asarray(x)
    expanded = [1] * len(shape)
    for in_dim, out_dim in enumerate(broadcast_dimensions):
        expanded[out_dim] = x.shape[in_dim]
    return np.broadcast_to(x.reshape(expanded), shape)


def _broadcast_transpose(ct, x, *, shape, broadcast_dimensions):
    """Sum the cotangent over every axis the broadcast created or stretched."""
    from ember.ops.reductions import reduce_sum

    in_shape = x.aval.shape
    summed = {d for d in range(len(shape)) if d not in broadcast_dimensions}
    summed |= {out for i, out in enumerate(broadcast_dimensions)
               if in_shape[i] == 1 and shape[out] != 1}
    total = reduce_sum(ct, tuple(sorted(summed))) if summed else ct
    return [reshape(total, in_shape)]


deflinear(broadcast_in_dim_p, _broadcast_transpose)
_def_front_batch(broadcast_in_dim_p, lambda size, shape, broadcast_dimensions: dict(
    shape=(size, *shape), broadcast_dimensions=(0, *_shifted(broadcast_dimensions))))


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    """Broadcast ``x`` to ``shape``; operand axis ``i`` becomes output axis
    ``broadcast_dimensions[i]`` (sizes must match or be 1)."""
    shape, dims = _ints(shape), _ints(broadcast_dimensions)
    if tuple(np.shape(x)) == shape and dims == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


def expand_dims(x: Any, dimensions: Sequence[int]) -> Any:
    """Insert size-1 axes at ``dimensions`` (positions in the result; negative allowed)."""
    shape = _aval_shape(x)
    out_ndim = len(shape) + len(dimensions)
    new = canonical_axes(dimensions, out_ndim, "expand_dims")
    kept = [d for d in range(out_ndim) if d not in new]
    out_shape = [1] * out_ndim
    for in_dim, out_dim in enumerate(kept):
        out_shape[out_dim] = shape[in_dim]
    return broadcast_in_dim(x, out_shape, kept)


# --- reshape --------------------------------------------------------------------------

reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_abstract(x: ShapedArray, *, new_sizes: tuple[int, ...]) -> ShapedArray:
    if any(d < 0 for d in new_sizes) or int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise ShapeError(f"cannot reshape array of shape {x.shape} (size {x.size}) into "
                         f"shape {new_sizes} (size {int(np.prod(new_sizes, dtype=np.int64))})")
    return ShapedArray(new_sizes, x.dtype)


@reshape_p.def_impl
def _reshape_impl(x, *, new_sizes):
    return np.reshape(x, new_sizes)


deflinear(reshape_p, lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])
_def_front_batch(reshape_p, lambda size, new_sizes: dict(new_sizes=(size, *new_sizes)))


def reshape(x: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Any:
    """Reshape ``x`` (row-major) to ``new_sizes``; ``dimensions``, if given, is a
    permutation applied to ``x`` first (as ``jax.lax.reshape``)."""
    if dimensions is not None:
        x = transpose(x, dimensions)
    new_sizes = _ints(new_sizes)
    if aval_of(x).shape == new_sizes:  # aval_of: also checks x is an array Ember takes
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


# --- transpose ------------------------------------------------------------------------

transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_abstract(x: ShapedArray, *, permutation: tuple[int, ...]) -> ShapedArray:
    if sorted(permutation) != list(range(x.ndim)):
        raise EmberValueError(f"transpose: {permutation} is not a permutation of the "
                              f"{x.ndim} axes of shape {x.shape}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype)


@transpose_p.def_impl
def _transpose_impl(x, *, permutation):
    return np.transpose(x, permutation)


def _transpose_transpose(ct, x, *, permutation):
    return [transpose(ct, tuple(np.argsort(permutation)))]


@transpose_p.def_batch
def _transpose_batch(values, dims, *, permutation):
    (x,), (dim,) = values, dims
    moved = [p if p < dim else p + 1 for p in permutation]
    return transpose_p.bind(x, permutation=(dim, *moved)), 0


deflinear(transpose_p, _transpose_transpose)


def transpose(x: Any, permutation: Sequence[int]) -> Any:
    """Permute the axes of ``x``: output axis ``i`` is input axis ``permutation[i]``."""
    permutation = _ints(permutation)
    if permutation == tuple(range(len(permutation))) and len(permutation) == np.ndim(x):
        return x
    return transpose_p.bind(x, permutation=permutation)


# --- squeeze --------------------------------------------------------------------------

squeeze_p = Primitive("squeeze")


@squeeze_p.def_abstract_eval
def _squeeze_abstract(x: ShapedArray, *, dimensions: tuple[int, ...]) -> ShapedArray:
    for d in dimensions:
        if not 0 <= d < x.ndim or x.shape[d] != 1:
            raise EmberValueError(f"squeeze: axis {d} of shape {x.shape} is not of size 1; "
                                  "only size-1 axes can be squeezed")
    return ShapedArray(tuple(s for d, s in enumerate(x.shape) if d not in dimensions), x.dtype)


@squeeze_p.def_impl
def _squeeze_impl(x, *, dimensions):
    return np.squeeze(x, dimensions)


deflinear(squeeze_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])
_def_front_batch(squeeze_p, lambda size, dimensions: dict(dimensions=_shifted(dimensions)))


def squeeze(x: Any, dimensions: Sequence[int]) -> Any:
    """Remove the size-1 axes ``dimensions`` (negative allowed)."""
    dims = tuple(sorted(canonical_axes(dimensions, len(_aval_shape(x)), "squeeze")))
    if not dims:
        return x
    return squeeze_p.bind(x, dimensions=dims)


# --- rev ------------------------------------------------------------------------------

rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_abstract(x: ShapedArray, *, dimensions: tuple[int, ...]) -> ShapedArray:
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise EmberValueError(f"rev: dimensions {dimensions} must be distinct axes of an "
                              f"array of shape {x.shape}")
    return x


@rev_p.def_impl
def _rev_impl(x, *, dimensions):
    return np.flip(x, dimensions) if dimensions else np.asarray(x)


deflinear(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])
_def_front_batch(rev_p, lambda size, dimensions: dict(dimensions=_shifted(dimensions)))


def rev(x: Any, dimensions: Sequence[int]) -> Any:
    """Reverse the order of elements along ``dimensions``."""
    dims = tuple(sorted(canonical_axes(dimensions, len(_aval_shape(x)), "rev")))
    if not dims:
        return x
    return rev_p.bind(x, dimensions=dims)


# --- pad ------------------------------------------------------------------------------

pad_p = Primitive("pad")


def _padded_size(size: int, lo: int, hi: int, interior: int) -> int:
    return lo + hi + size + max(size - 1, 0) * interior


@pad_p.def_abstract_eval
def _pad_abstract(x: ShapedArray, padding_value: ShapedArray, *,
                  padding_config: tuple[tuple[int, int, int], ...]) -> ShapedArray:
    if padding_value.shape != ():
        raise EmberValueError(f"pad: padding_value must be a scalar, got shape "
                              f"{padding_value.shape}")
    if padding_value.dtype != x.dtype:
        raise EmberTypeError(f"pad: padding_value dtype {padding_value.dtype} differs from "
                             f"operand dtype {x.dtype}")
    if len(padding_config) != x.ndim:
        raise EmberValueError(f"pad: padding_config has {len(padding_config)} entries for an "
                              f"operand of shape {x.shape}; need one (lo, hi, interior) per axis")
    shape = []
    for axis, (size, (lo, hi, interior)) in enumerate(zip(x.shape, padding_config)):
        out = _padded_size(size, lo, hi, interior)
        if interior < 0 or out < 0:
            raise EmberValueError(
                f"pad: config {(lo, hi, interior)} on axis {axis} (size {size}) of shape "
                f"{x.shape} is invalid: interior must be >= 0 and the result size "
                f"(here {out}) must not be negative")
        shape.append(out)
    return ShapedArray(tuple(shape), x.dtype)


@pad_p.def_impl
def _pad_impl(x, padding_value, *, padding_config):
    x = np.asarray(x)
    # Interior padding first: spread the elements out with `interior` gaps between.
    spread_shape = [_padded_size(s, 0, 0, i) for s, (_, _, i) in zip(x.shape, padding_config)]
    spread = np.full(spread_shape, padding_value, dtype=x.dtype)
    spread[tuple(np.s_[::i + 1] for (_, _, i) in padding_config)] = x
    # Then edges: positive lo/hi add padding, negative ones cut elements off.
    out_shape = [_padded_size(s, lo, hi, i) for s, (lo, hi, i) in zip(x.shape, padding_config)]
    out = np.full(out_shape, padding_value, dtype=x.dtype)
    src, dst = [], []
    for size, out_size, (lo, hi, _) in zip(spread_shape, out_shape, padding_config):
        start = max(-lo, 0)
        stop = max(size - max(-hi, 0), start)
        src.append(np.s_[start:stop])
        dst.append(np.s_[max(lo, 0):max(lo, 0) + stop - start])
    out[tuple(dst)] = spread[tuple(src)]
    return out


def _pad_transpose(ct, x, padding_value, *, padding_config):
    from ember.ops.elementwise import sub
    from ember.ops.reductions import reduce_sum

    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    unpadded = pad(ct, np.zeros((), ct.dtype), [(-a, -b, 0) for a, b in zip(lo, hi)])
    ct_x = slice(unpadded, (0,) * len(lo), unpadded.shape, [i + 1 for i in interior])
    ct_value = None
    if is_undefined_primal(padding_value):
        every = tuple(range(len(lo)))
        ct_value = sub(reduce_sum(ct, every), reduce_sum(ct_x, every))
    return [ct_x if is_undefined_primal(x) else None, ct_value]


@pad_p.def_batch
def _pad_batch(values, dims, *, padding_config):
    from ember.ops.elementwise import select_n

    (x, value), (x_dim, value_dim) = values, dims
    size = batch_size(values, dims)
    x = _at_front(x, x_dim, size)
    config = ((0, 0, 0), *padding_config)
    if value_dim is None:
        return pad_p.bind(x, value, padding_config=config), 0
    # A padding value per batch member: pad with zeros, then select it into the gaps.
    padded = pad_p.bind(x, np.zeros((), x.dtype), padding_config=config)
    inside = pad_p.bind(broadcast_in_dim(np.array(True), x.shape, ()), np.array(False),
                        padding_config=config)
    values_full = broadcast_in_dim(value, padded.shape, (0,))
    return select_n(inside, values_full, padded), 0


deflinear(pad_p, _pad_transpose)


def pad(x: Any, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> Any:
    """Pad each axis with ``(lo, hi, interior)`` copies of ``padding_value``: ``lo`` before,
    ``hi`` after (negative values remove elements) and ``interior`` between elements."""
    config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    if dtypes.is_weak_scalar(padding_value):  # a Python scalar takes x's dtype, stays 0-d
        padding_value = np.asarray(padding_value, dtype=aval_of(x).dtype)
    return pad_p.bind(x, padding_value, padding_config=config)


# --- concatenate ----------------------------------------------------------------------

concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_abstract(*operands: ShapedArray, dimension: int) -> ShapedArray:
    if not operands:
        raise EmberValueError("concatenate needs at least one operand")
    first = operands[0]
    if not 0 <= dimension < first.ndim:
        raise EmberIndexError(f"concatenate: dimension {dimension} is out of bounds for "
                              f"operands of rank {first.ndim}")
    for other in operands[1:]:
        if other.dtype != first.dtype:
            raise EmberTypeError(f"concatenate: operand dtypes {first.dtype} and {other.dtype} "
                                 "differ")
        others = [s for d, s in enumerate(other.shape) if d != dimension]
        if other.ndim != first.ndim or others != [s for d, s in enumerate(first.shape)
                                                  if d != dimension]:
            raise EmberValueError(
                f"concatenate: shapes {first.shape} and {other.shape} must agree on every "
                f"axis except dimension {dimension}")
    shape = list(first.shape)
    shape[dimension] = sum(o.shape[dimension] for o in operands)
    return ShapedArray(tuple(shape), first.dtype)


@concatenate_p.def_impl
def _concatenate_impl(*operands, dimension):
    return np.concatenate(operands, axis=dimension)


def _concatenate_transpose(ct, *operands, dimension):
    cts, start = [], 0
    for operand in operands:
        size = aval_of(operand).shape[dimension]
        if is_undefined_primal(operand):
            cts.append(slice_in_dim(ct, start, start + size, axis=dimension))
        else:
            cts.append(None)
        start += size
    return cts


@concatenate_p.def_batch
def _concatenate_batch(values, dims, *, dimension):
    size = batch_size(values, dims)
    moved = [_at_front(v, d, size) for v, d in zip(values, dims)]
    return concatenate_p.bind(*moved, dimension=dimension + 1), 0


deflinear(concatenate_p, _concatenate_transpose)


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    """Join arrays of one dtype along ``dimension``."""
    try:
        operands = list(operands)
    except TypeError:
        raise EmberTypeError(f"concatenate takes a sequence of arrays, got "
                             f"{type(operands).__name__}") from None
    if not operands:
        raise EmberValueError("concatenate needs at least one operand")
    dimension = canonical_axis(dimension, len(_aval_shape(operands[0])), "concatenate")
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=dimension)


# --- iota -----------------------------------------------------------------------------

iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract(*, dtype: np.dtype, shape: tuple[int, ...], dimension: int) -> ShapedArray:
    if dtypes.is_bool(dtype):
        raise EmberTypeError("iota: dtype bool has no counting sequence; use an integer or "
                             "floating dtype")
    if not 0 <= dimension < len(shape) or any(s < 0 for s in shape):
        raise EmberValueError(f"iota: dimension {dimension} must be an axis of the "
                              f"non-negative shape {shape}")
    return ShapedArray(shape, dtype)


@iota_p.def_impl
def _iota_impl(*, dtype, shape, dimension):
    count = np.arange(shape[dimension]).astype(dtype)
    return broadcast_in_dim_p.impl_rule(count, shape=shape, broadcast_dimensions=(dimension,))


for _rule in ("jvp", "transpose", "batch"):
    iota_p.waive(_rule, "iota has no operands")


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    """An array of ``shape`` whose value is the index along ``dimension``."""
    shape = _ints(shape)
    dimension = canonical_axis(dimension, len(shape), "broadcasted_iota")
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=shape, dimension=dimension)


def iota(dtype: Any, size: int) -> Any:
    """``[0, 1, ..., size - 1]`` of ``dtype``."""
    return broadcasted_iota(dtype, (int(size),), 0)


# --- slice ----------------------------------------------------------------------------

slice_p = Primitive("slice")


def _sliced_size(start: int, limit: int, stride: int) -> int:
    return max(0, -(-(limit - start) // stride))


@slice_p.def_abstract_eval
def _slice_abstract(x: ShapedArray, *, start_indices: tuple[int, ...],
                    limit_indices: tuple[int, ...], strides: tuple[int, ...]) -> ShapedArray:
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise EmberValueError(
            f"slice: operand of shape {x.shape} needs {x.ndim} start, limit and stride "
            f"values, got {start_indices}, {limit_indices}, {strides}")
    for axis, (size, start, limit, stride) in enumerate(
            zip(x.shape, start_indices, limit_indices, strides)):
        if not 0 <= start <= limit <= size or stride < 1:
            raise EmberIndexError(
                f"slice: [{start}:{limit}:{stride}] on axis {axis} of shape {x.shape} is out "
                "of range; need 0 <= start <= limit <= size and stride >= 1")
    return ShapedArray(tuple(_sliced_size(*t) for t in zip(start_indices, limit_indices,
                                                           strides)), x.dtype)


@slice_p.def_impl
def _slice_impl(x, *, start_indices, limit_indices, strides):
    return np.asarray(x)[tuple(np.s_[a:b:s] for a, b, s in zip(start_indices, limit_indices,
                                                               strides))]


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    config = []
    for size, out, start, stride in zip(x.aval.shape, ct.shape, start_indices, strides):
        used = _padded_size(out, start, 0, stride - 1)
        config.append((start, size - used, stride - 1))
    return [pad(ct, np.zeros((), ct.dtype), config)]


deflinear(slice_p, _slice_transpose)
_def_front_batch(slice_p, lambda size, start_indices, limit_indices, strides: dict(
    start_indices=(0, *start_indices), limit_indices=(size, *limit_indices),
    strides=(1, *strides)))


def slice(x: Any, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Any:
    """``x[start:limit:stride]`` on every axis, with static bounds."""
    starts, limits = _ints(start_indices), _ints(limit_indices)
    steps = (1,) * len(starts) if strides is None else _ints(strides)
    if starts == (0,) * len(starts) and limits == tuple(np.shape(x)) and set(steps) <= {1}:
        return x
    return slice_p.bind(x, start_indices=starts, limit_indices=limits, strides=steps)


def slice_in_dim(x: Any, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Any:
    """``slice`` along one axis; ``None`` means the edge, negative counts from the end."""
    shape = _aval_shape(x)
    axis = canonical_axis(axis, len(shape), "slice_in_dim")
    size = shape[axis]
    start = 0 if start_index is None else int(start_index)
    limit = size if limit_index is None else int(limit_index)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis] = start + size if start < 0 else start
    limits[axis] = limit + size if limit < 0 else limit
    strides[axis] = int(stride)
    return slice(x, starts, limits, strides)


def index_in_dim(x: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """Element ``index`` along ``axis`` (static; negative counts from the end)."""
    shape = _aval_shape(x)
    axis = canonical_axis(axis, len(shape), "index_in_dim")
    index, size = int(index), shape[axis]
    if not -size <= index < size:
        raise EmberIndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} "
                              f"of size {size}")
    index %= size
    result = slice_in_dim(x, index, index + 1, axis=axis)
    return result if keepdims else squeeze(result, (axis,))


# --- dynamic_slice --------------------------------------------------------------------

def _check_start_indices(op: str, x: ShapedArray, indices: Sequence[ShapedArray]) -> None:
    if len(indices) != x.ndim:
        raise EmberValueError(f"{op}: operand of shape {x.shape} needs {x.ndim} start "
                              f"indices, got {len(indices)}")
    for index in indices:
        if index.shape != () or not dtypes.is_integer(index.dtype):
            raise EmberTypeError(f"{op}: start indices must be integer scalars, got "
                                 f"{index.str_short()}")


def _clamped_starts(shape: Sequence[int], sizes: Sequence[int], indices: Sequence[Any]):
    """Start indices moved into range so the window fits (XLA semantics)."""
    return [int(np.clip(np.asarray(i).astype(np.int64), 0, dim - size))
            for i, dim, size in zip(indices, shape, sizes)]


dynamic_slice_p = Primitive("dynamic_slice")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract(x: ShapedArray, *indices: ShapedArray,
                            slice_sizes: tuple[int, ...]) -> ShapedArray:
    _check_start_indices("dynamic_slice", x, indices)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        raise EmberValueError(f"dynamic_slice: slice_sizes {slice_sizes} must give one size "
                              f"per axis of shape {x.shape}, each between 0 and the axis size")
    return ShapedArray(slice_sizes, x.dtype)


@dynamic_slice_p.def_impl
def _dynamic_slice_impl(x, *indices, slice_sizes):
    x = np.asarray(x)
    starts = _clamped_starts(x.shape, slice_sizes, indices)
    return x[tuple(np.s_[s:s + n] for s, n in zip(starts, slice_sizes))]


def _dynamic_slice_transpose(ct, x, *indices, slice_sizes):
    zeros = zeros_like_aval(x.aval)
    return [dynamic_update_slice_p.bind(zeros, ct, *indices), *[None] * len(indices)]


@dynamic_slice_p.def_batch
def _dynamic_slice_batch(values, dims, *, slice_sizes):
    """A batched dynamic slice is a gather of one window per batch member."""
    from ember.ops.indexing import batch_gather, window_gather_params

    size = batch_size(values, dims)
    (x, *indices), (x_dim, *index_dims) = values, dims
    if not indices:  # a 0-d operand: the window is the whole value
        return x, x_dim
    index_vector, index_dim = _index_vector(indices, index_dims, size)
    params = window_gather_params(slice_sizes)
    return batch_gather(x, x_dim, index_vector, index_dim, **params)


def _index_vector(indices: Sequence[Any], dims: Sequence[int | None], size: int):
    """Stack scalar start indices into one index vector (batched to ``(size, n)`` if any
    index is batched); returns the vector and its batch axis."""
    from ember.ops.elementwise import convert_element_type

    dtype = dtypes.result_type(*[aval_of(i).dtype for i in indices])
    batched = any(d is not None for d in dims)
    columns = []
    for index, dim in zip(indices, dims):
        index = np.asarray(index, dtype) if isinstance(index, (int, np.integer)) \
            else convert_element_type(index, dtype)
        if batched:
            columns.append(broadcast_in_dim(index, (size, 1), () if dim is None else (0,)))
        else:
            columns.append(reshape(index, (1,)))
    return concatenate(columns, 1 if batched else 0), (0 if batched else None)


def _wrap_negative(indices: Sequence[Any], shape: Sequence[int],
                   allow_negative: bool | Sequence[bool]) -> list[Any]:
    """Make negative start indices count from the end of their axis (as JAX's default)."""
    from ember.ops.elementwise import add, lt, select_n

    if isinstance(allow_negative, bool):
        allow_negative = [allow_negative] * len(shape)
    wrapped = []
    for index, size, allowed in zip(indices, shape, allow_negative):
        if not allowed or not dtypes.is_signed(aval_of(index).dtype):
            wrapped.append(index)
        elif isinstance(index, (int, np.integer)) or (
                isinstance(index, np.ndarray) and index.ndim == 0):
            wrapped.append(index + size if index < 0 else index)
        else:
            wrapped.append(select_n(lt(index, 0), index, add(index, size)))
    return wrapped


def dynamic_slice(x: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """The window of ``slice_sizes`` at (possibly traced) ``start_indices``.

    Start indices are clamped so the window fits inside ``x`` (XLA semantics); with
    ``allow_negative_indices`` a negative index first counts from the end of its axis.
    """
    shape = _aval_shape(x)
    indices = _wrap_negative(list(start_indices), shape, allow_negative_indices)
    return dynamic_slice_p.bind(x, *indices, slice_sizes=_ints(slice_sizes))


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Any:
    """``dynamic_slice`` along one axis (the others are taken whole)."""
    shape = _aval_shape(operand)
    axis = canonical_axis(axis, len(shape), "dynamic_slice_in_dim")
    starts: list[Any] = [0] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, int(slice_size)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(x: Any, index: Any, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Any:
    """Element ``index`` (possibly traced, clamped) along ``axis``."""
    axis = canonical_axis(axis, len(_aval_shape(x)), "dynamic_index_in_dim")
    result = dynamic_slice_in_dim(x, index, 1, axis,
                                  allow_negative_indices=allow_negative_indices)
    return result if keepdims else squeeze(result, (axis,))


# --- dynamic_update_slice -------------------------------------------------------------

dynamic_update_slice_p = Primitive("dynamic_update_slice")


@dynamic_update_slice_p.def_abstract_eval
def _dynamic_update_slice_abstract(x: ShapedArray, update: ShapedArray,
                                   *indices: ShapedArray) -> ShapedArray:
    _check_start_indices("dynamic_update_slice", x, indices)
    if update.dtype != x.dtype:
        raise EmberTypeError(f"dynamic_update_slice: update dtype {update.dtype} differs from "
                             f"operand dtype {x.dtype}")
    if update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        raise EmberValueError(f"dynamic_update_slice: update of shape {update.shape} does not "
                              f"fit in operand of shape {x.shape}")
    return x


@dynamic_update_slice_p.def_impl
def _dynamic_update_slice_impl(x, update, *indices):
    out = np.array(x, copy=True)
    update = np.asarray(update)
    starts = _clamped_starts(out.shape, update.shape, indices)
    out[tuple(np.s_[s:s + n] for s, n in zip(starts, update.shape))] = update
    return out


def _dynamic_update_slice_transpose(ct, x, update, *indices):
    ct_x = ct_update = None
    if is_undefined_primal(x):
        ct_x = dynamic_update_slice_p.bind(ct, zeros_like_aval(update.aval), *indices)
    if is_undefined_primal(update):
        ct_update = dynamic_slice_p.bind(ct, *indices, slice_sizes=update.aval.shape)
    return [ct_x, ct_update, *[None] * len(indices)]


@dynamic_update_slice_p.def_batch
def _dynamic_update_slice_batch(values, dims):
    """A batched dynamic update is a scatter of one window per batch member."""
    from ember.ops.indexing import batch_scatter, scatter_p, window_scatter_params

    size = batch_size(values, dims)
    (x, update, *indices), (x_dim, update_dim, *index_dims) = values, dims
    if not indices:  # a 0-d operand: the update replaces all of it
        return move_batch_axis(update, update_dim, 0, size), 0
    index_vector, index_dim = _index_vector(indices, index_dims, size)
    params = window_scatter_params(len(indices))
    return batch_scatter(scatter_p, (x, index_vector, update), (x_dim, index_dim, update_dim),
                         **params)


deflinear(dynamic_slice_p, _dynamic_slice_transpose, linear_argnums=(0,))
deflinear(dynamic_update_slice_p, _dynamic_update_slice_transpose, linear_argnums=(0, 1))


def dynamic_update_slice(x: Any, update: Any, start_indices: Sequence[Any], *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """``x`` with the window at ``start_indices`` replaced by ``update`` (indices clamped
    so the update fits, as XLA; negative ones count from the end by default)."""
    shape = _aval_shape(x)
    indices = _wrap_negative(list(start_indices), shape, allow_negative_indices)
    return dynamic_update_slice_p.bind(x, update, *indices)


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """``dynamic_update_slice`` at ``start_index`` along ``axis`` (0 elsewhere)."""
    shape = _aval_shape(operand)
    axis = canonical_axis(axis, len(shape), "dynamic_update_slice_in_dim")
    starts: list[Any] = [0] * len(shape)
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts,
                                allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(x: Any, update: Any, index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """Replace element ``index`` along ``axis``; ``update`` may lack that axis."""
    shape = _aval_shape(x)
    axis = canonical_axis(axis, len(shape), "dynamic_update_index_in_dim")
    if len(_aval_shape(update)) == len(shape) - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(x, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# --- sharding rules -------------------------------------------------------------------
# Each result dimension comes from one operand dimension (``mapped_sharding``); a
# dimension the operation moves data along (sliced, padded, reversed, concatenated)
# stays whole. Size parameters are rewritten at the shard's sizes.

def _broadcast_sharding(query: ShardingQuery) -> ShardingDecision:
    (x,), params = query.in_avals, query.params
    shape, dims = params["shape"], params["broadcast_dimensions"]
    mapping = [o if x.shape[i] == shape[o] else None for i, o in enumerate(dims)]
    return mapped_sharding(query, [mapping], lambda local: dict(params, shape=local),
                           creates=True)


def _reshape_dim_pairs(in_shape: Sequence[int], out_shape: Sequence[int]) -> list[int | None]:
    """Operand dimension -> the result dimension a split of it carries over to: the one
    starting at the same row-major offset (equal products of the sizes before them).
    A split of a dimension into n blocks is then a split of that result dimension into
    the same n blocks whenever both sizes divide by n (the picker checks that)."""
    starts_out = {int(np.prod(out_shape[:o], dtype=np.int64)): o
                  for o in range(len(out_shape)) if out_shape[o] != 1}
    return [starts_out.get(int(np.prod(in_shape[:d], dtype=np.int64)))
            if in_shape[d] != 1 else None for d in range(len(in_shape))]


def _reshape_sharding(query: ShardingQuery) -> ShardingDecision:
    (x,), params = query.in_avals, query.params
    mapping = _reshape_dim_pairs(x.shape, params["new_sizes"])
    return mapped_sharding(query, [mapping], lambda local: dict(params, new_sizes=local))


def _transpose_sharding(query: ShardingQuery) -> ShardingDecision:
    perm = query.params["permutation"]
    mapping = [perm.index(d) for d in range(len(perm))]
    return mapped_sharding(query, [mapping])


def _squeeze_sharding(query: ShardingQuery) -> ShardingDecision:
    removed = set(query.params["dimensions"])
    kept = [d for d in range(query.in_avals[0].ndim) if d not in removed]
    mapping: list[int | None] = [None] * query.in_avals[0].ndim
    for o, d in enumerate(kept):
        mapping[d] = o
    return mapped_sharding(query, [mapping])


def _whole_along(*dims_of: Callable[[ShardingQuery], Sequence[int]]):
    """The rule of an operation that keeps every dimension's place but moves data
    along some (``dims_of(query)``); its other operands are scalars."""
    def rule(query: ShardingQuery) -> ShardingDecision:
        whole = {d for dims in dims_of for d in dims(query)}
        x = query.in_avals[0]
        maps = [identity_map(x.ndim, whole)] + [[] for _ in query.in_avals[1:]]
        return mapped_sharding(query, maps)
    return rule


def _slice_sharding(query: ShardingQuery) -> ShardingDecision:
    (x,), params = query.in_avals, query.params
    whole = [d for d, (start, limit, stride) in enumerate(zip(
        params["start_indices"], params["limit_indices"], params["strides"]))
        if (start, limit, stride) != (0, x.shape[d], 1)]
    return mapped_sharding(query, [identity_map(x.ndim, whole)], lambda local: dict(
        params, limit_indices=tuple(local[d] if d not in whole else limit
                                    for d, limit in enumerate(params["limit_indices"]))))


def _concatenate_sharding(query: ShardingQuery) -> ShardingDecision:
    dim = query.params["dimension"]
    return mapped_sharding(query, [identity_map(a.ndim, [dim]) for a in query.in_avals])


def _dynamic_slice_sharding(query: ShardingQuery) -> ShardingDecision:
    x, params = query.in_avals[0], query.params
    whole = [d for d, size in enumerate(params["slice_sizes"]) if size != x.shape[d]]
    maps = [identity_map(x.ndim, whole)] + [[] for _ in query.in_avals[1:]]
    return mapped_sharding(query, maps, lambda local: dict(params, slice_sizes=local))


def _dynamic_update_slice_sharding(query: ShardingQuery) -> ShardingDecision:
    x, update = query.in_avals[:2]
    whole = [d for d in range(x.ndim) if update.shape[d] != x.shape[d]]
    maps = [identity_map(x.ndim, whole), identity_map(x.ndim, whole)]
    return mapped_sharding(query, maps + [[] for _ in query.in_avals[2:]])


broadcast_in_dim_p.def_sharding(_broadcast_sharding)
reshape_p.def_sharding(_reshape_sharding)
transpose_p.def_sharding(_transpose_sharding)
squeeze_p.def_sharding(_squeeze_sharding)
rev_p.def_sharding(_whole_along(lambda q: q.params["dimensions"]))
pad_p.def_sharding(_whole_along(lambda q: [d for d, c in enumerate(q.params["padding_config"])
                                           if tuple(c) != (0, 0, 0)]))
concatenate_p.def_sharding(_concatenate_sharding)
slice_p.def_sharding(_slice_sharding)
dynamic_slice_p.def_sharding(_dynamic_slice_sharding)
dynamic_update_slice_p.def_sharding(_dynamic_update_slice_sharding)
iota_p.waive("sharding", "no operands: made whole on every shard, then sliced")
