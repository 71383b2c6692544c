"""Gather and scatter: XLA's general indexing primitives.

Both relate three arrays: the ``operand``, an integer ``indices`` array whose *last* axis
is the index vector (so its other axes are batch axes), and a *result* (gather's output,
scatter's updates) made of batch axes and window axes. Dimension numbers say which
result axes are window axes, which operand axes have no window axis (size-1, dropped),
which operand axis each index-vector entry addresses, and which operand axes are paired
one-to-one with batch axes of the indices (``operand_batching_dims``).

Out-of-bounds handling (``mode``), as JAX:
- ``'fill'`` (the default, JAX's FILL_OR_DROP): a gather window that does not fit inside
  the operand yields ``fill_value`` (default: NaN for inexact dtypes, the most negative
  value for signed integers, the largest for unsigned, True for bool); a scatter window
  that does not fit is dropped.
- ``'clip'``: start indices are clamped so the window fits.
- ``'promise_in_bounds'``: the caller promises in-bounds indices; out-of-bounds gathers
  clamp and out-of-bounds scatters are dropped (XLA's native behaviour).
No mode ever reads or writes outside a buffer.

Scatters with repeated indices combine every update (add, mul, min, max); the
overwriting ``scatter`` keeps one of them (the reference keeps the last in row-major
order of the updates; compiled backends may keep any, as XLA).

Derivatives (as JAX): gather is linear in its operand (out-of-bounds tangents are 0) and
transposes to scatter_add, and scatter_add to gather. scatter_min / scatter_max pass on
the tangent of whichever value won, shared equally between ties. The overwriting
scatter tags updates with ids to find the winners (or is linear with unique_indices).
scatter_mul is differentiable in its updates only with ``unique_indices=True``.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops.structural import broadcast_in_dim, canonical_axis, iota
from ember.ops.rules import (
    Zero, add_tangents, batch_size, def_linear_jvp, is_undefined_primal, move_batch_axis,
    zeros_like_aval)

__all__ = [
    "GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode", "gather",
    "scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max",
]


class GatherDimensionNumbers(NamedTuple):
    """How gather's operand, start indices and output axes relate (as XLA / JAX)."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How scatter's operand, indices and updates axes relate (as XLA / JAX)."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """Out-of-bounds behaviour (see the module docstring). Stored in params as its value."""

    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @staticmethod
    def from_any(mode: "str | GatherScatterMode | None") -> "GatherScatterMode":
        if isinstance(mode, GatherScatterMode):
            return mode
        if mode is None or mode in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if mode in ("clip", "promise_in_bounds"):
            return GatherScatterMode(mode)
        raise EmberValueError(f"unknown gather/scatter mode {mode!r}; use 'clip', 'fill' "
                              "(or 'drop') or 'promise_in_bounds'")


CLIP, FILL = GatherScatterMode.CLIP.value, GatherScatterMode.FILL_OR_DROP.value


def _normalize_dnums(dnums: Sequence[Sequence[int]], kind: type) -> Any:
    """Dimension numbers as ``kind`` with tuples of ints (params may arrive as plain
    tuples, e.g. from the IR parser)."""
    return kind(*(tuple(int(d) for d in field) for field in dnums))


# --- geometry shared by gather and scatter --------------------------------------------
# Both NamedTuples list their fields in the same roles: (window axes of the result,
# operand axes without a window, index map, operand batching axes, indices batching axes).

def _check_sorted_unique(op: str, name: str, dims: tuple[int, ...], bound: int,
                         what: str, sort: bool = True) -> None:
    ordered = sorted(set(dims)) == list(dims) if sort else len(set(dims)) == len(dims)
    if not ordered or any(not 0 <= d < bound for d in dims):
        order = "sorted, distinct" if sort else "distinct"
        raise EmberValueError(f"{op}: {name}={dims} must be {order} axes of the {what} "
                              f"(rank {bound})")


def _check_dnums(op: str, dnums: NamedTuple, operand: ShapedArray, indices: ShapedArray,
                 result_rank: int) -> None:
    window, dropped, index_map, operand_batch, indices_batch = dnums
    names = dnums._fields
    if not dtypes.is_integer(indices.dtype) or indices.ndim < 1:
        raise EmberTypeError(f"{op}: indices must be an integer array of rank >= 1 (its last "
                             f"axis is the index vector), got {indices.str_short()}")
    _check_sorted_unique(op, names[0], window, result_rank, "result")
    _check_sorted_unique(op, names[1], dropped, operand.ndim, "operand")
    _check_sorted_unique(op, names[3], operand_batch, operand.ndim, "operand")
    _check_sorted_unique(op, names[2], index_map, operand.ndim, "operand", sort=False)
    _check_sorted_unique(op, names[4], indices_batch, indices.ndim - 1,
                         "indices without their index vector axis", sort=False)
    if set(dropped) & set(operand_batch) or set(index_map) & set(operand_batch):
        raise EmberValueError(f"{op}: {names[3]}={operand_batch} must not overlap "
                              f"{names[1]}={dropped} or {names[2]}={index_map}")
    if len(index_map) != indices.shape[-1]:
        raise EmberValueError(f"{op}: {names[2]}={index_map} has {len(index_map)} entries but "
                              f"the index vectors of indices {indices.shape} have "
                              f"{indices.shape[-1]}")
    if len(operand_batch) != len(indices_batch) or any(
            operand.shape[o] != indices.shape[i] for o, i in zip(operand_batch, indices_batch)):
        raise EmberValueError(f"{op}: {names[3]}={operand_batch} of operand {operand.shape} and "
                              f"{names[4]}={indices_batch} of indices {indices.shape} must "
                              "pair up axes of equal size")
    if len(window) != operand.ndim - len(dropped) - len(operand_batch):
        raise EmberValueError(
            f"{op}: {names[0]}={window} must name one result axis per operand axis that is "
            f"in neither {names[1]}={dropped} nor {names[3]}={operand_batch} (operand "
            f"{operand.shape})")


def _window_operand_dims(dnums: NamedTuple, rank: int) -> tuple[int, ...]:
    """Operand axes that carry a window axis of the result, in order."""
    return tuple(d for d in range(rank) if d not in dnums[1] and d not in dnums[3])


def _as_int64(values: np.ndarray) -> np.ndarray:
    """Indices as int64; huge unsigned values saturate (they are out of bounds anyway)."""
    if values.dtype == np.uint64:
        values = np.minimum(values, np.iinfo(np.int64).max)
    return values.astype(np.int64)


def _operand_positions(dnums: NamedTuple, operand_shape: tuple[int, ...],
                       window_sizes: Sequence[int], indices: np.ndarray,
                       result_shape: tuple[int, ...]):
    """For every result element, the operand position it reads (gather) or writes
    (scatter), with start indices clamped so windows fit; and whether its window was in
    bounds before clamping. Both come broadcast to ``result_shape``."""
    window, _, index_map, operand_batch, indices_batch = dnums
    batch_shape = indices.shape[:-1]
    rank = len(result_shape)
    batch_positions = [p for p in range(rank) if p not in window]

    def on_result(values: np.ndarray) -> np.ndarray:  # batch-shaped -> result rank
        shape = [1] * rank
        for position, size in zip(batch_positions, batch_shape):
            shape[position] = size
        return values.reshape(shape)

    starts = [np.zeros(batch_shape, np.int64) for _ in operand_shape]
    in_bounds = np.ones(batch_shape, bool)
    for k, dim in enumerate(index_map):
        start, upper = _as_int64(indices[..., k]), operand_shape[dim] - window_sizes[dim]
        in_bounds &= (start >= 0) & (start <= upper)
        starts[dim] = np.clip(start, 0, upper)
    for dim, batch_axis in zip(operand_batch, indices_batch):
        shape = [1] * len(batch_shape)
        shape[batch_axis] = batch_shape[batch_axis]
        starts[dim] = np.broadcast_to(np.arange(batch_shape[batch_axis]).reshape(shape),
                                      batch_shape)
    positions = [on_result(s) for s in starts]
    for dim, position in zip(_window_operand_dims(dnums, len(operand_shape)), window):
        shape = [1] * rank
        shape[position] = result_shape[position]
        positions[dim] = positions[dim] + np.arange(result_shape[position]).reshape(shape)
    positions = tuple(np.broadcast_to(p, result_shape) for p in positions)
    return positions, np.broadcast_to(on_result(in_bounds), result_shape)


# --- gather ---------------------------------------------------------------------------

gather_p = Primitive("gather")


def default_fill_value(dtype: np.dtype) -> Any:
    """What a 'fill' gather returns out of bounds when no fill_value is given (as JAX)."""
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtypes.is_signed(dtype):
        return np.iinfo(dtype).min
    if dtypes.is_unsigned(dtype):
        return np.iinfo(dtype).max
    return True


@gather_p.def_abstract_eval
def _gather_abstract(operand: ShapedArray, indices: ShapedArray, *,
                     dimension_numbers: GatherDimensionNumbers, slice_sizes: tuple[int, ...],
                     **_: Any) -> ShapedArray:
    dnums = _normalize_dnums(dimension_numbers, GatherDimensionNumbers)
    out_rank = len(dnums.offset_dims) + indices.ndim - 1
    _check_dnums("gather", dnums, operand, indices, out_rank)
    if len(slice_sizes) != operand.ndim or any(
            not 0 <= s <= d for s, d in zip(slice_sizes, operand.shape)):
        raise EmberValueError(f"gather: slice_sizes {slice_sizes} must give one size per axis "
                              f"of operand {operand.shape}, each between 0 and the axis size")
    for dim in (*dnums.collapsed_slice_dims, *dnums.operand_batching_dims):
        if slice_sizes[dim] != 1:
            raise EmberValueError(f"gather: slice_sizes[{dim}] is {slice_sizes[dim]}, but "
                                  f"collapsed and batching axes need slice size 1")
    window_sizes = iter(slice_sizes[d] for d in _window_operand_dims(dnums, operand.ndim))
    batch_sizes = iter(indices.shape[:-1])
    shape = [next(window_sizes) if p in dnums.offset_dims else next(batch_sizes)
             for p in range(out_rank)]
    return ShapedArray(tuple(shape), operand.dtype)


@gather_p.def_impl
def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value,
                 **_: Any):
    operand, indices = np.asarray(operand), np.asarray(indices)
    dnums = _normalize_dnums(dimension_numbers, GatherDimensionNumbers)
    out_shape = _gather_abstract(aval_of(operand), aval_of(indices), dimension_numbers=dnums,
                                 slice_sizes=slice_sizes).shape
    positions, in_bounds = _operand_positions(dnums, operand.shape, slice_sizes, indices,
                                              out_shape)
    out = operand[positions]
    if mode == FILL:
        out = np.where(in_bounds, out, _fill(operand.dtype, fill_value))
    return out


def _fill(dtype: np.dtype, fill_value: Any) -> np.ndarray:
    value = default_fill_value(dtype) if fill_value is None else fill_value
    with np.errstate(invalid="ignore"):
        return np.asarray(value).astype(dtype)


def _gather_jvp(primals, tangents, **params):
    (operand, indices), (tangent, _) = primals, tangents
    out = gather_p.bind(operand, indices, **params)
    return out, gather_p.bind(tangent, indices, **{**params, "fill_value": 0})


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, mode,
                      fill_value, **flags):
    # Gather 'promise_in_bounds' clamps, so its transpose must clamp too.
    scatter_mode = CLIP if mode != FILL else FILL
    dnums = ScatterDimensionNumbers(*_normalize_dnums(dimension_numbers,
                                                      GatherDimensionNumbers))
    ct_operand = scatter_add_p.bind(zeros_like_aval(operand.aval), indices, ct,
                                    dimension_numbers=dnums, mode=scatter_mode, **flags)
    return [ct_operand, None]


def batch_gather(operand: Any, operand_dim: int | None, indices: Any, indices_dim: int | None,
                 *, dimension_numbers: GatherDimensionNumbers, slice_sizes: tuple[int, ...],
                 **params: Any):
    """Batch rule of gather (also used by dynamic_slice): the batch axis becomes output
    axis 0, as a window axis (only the operand is batched), an indices batch axis (only
    the indices are), or a pair of batching axes (both are)."""
    size = batch_size([operand, indices], [operand_dim, indices_dim])
    d = _normalize_dnums(dimension_numbers, GatherDimensionNumbers)
    if indices_dim is None:
        operand = move_batch_axis(operand, operand_dim, 0, size)
        dnums = GatherDimensionNumbers((0, *_shift(d.offset_dims)),
                                       _shift(d.collapsed_slice_dims), _shift(d.start_index_map),
                                       _shift(d.operand_batching_dims),
                                       d.start_indices_batching_dims)
        slice_sizes = (size, *slice_sizes)
    elif operand_dim is None:
        indices = move_batch_axis(indices, indices_dim, 0, size)
        dnums = d._replace(offset_dims=_shift(d.offset_dims),
                           start_indices_batching_dims=_shift(d.start_indices_batching_dims))
    else:
        operand = move_batch_axis(operand, operand_dim, 0, size)
        indices = move_batch_axis(indices, indices_dim, 0, size)
        dnums = GatherDimensionNumbers(_shift(d.offset_dims), _shift(d.collapsed_slice_dims),
                                       _shift(d.start_index_map),
                                       (0, *_shift(d.operand_batching_dims)),
                                       (0, *_shift(d.start_indices_batching_dims)))
        slice_sizes = (1, *slice_sizes)
    out = gather_p.bind(operand, indices, dimension_numbers=dnums, slice_sizes=slice_sizes,
                        **params)
    return out, 0


def _shift(dims: Sequence[int]) -> tuple[int, ...]:
    return tuple(d + 1 for d in dims)


gather_p.def_jvp(_gather_jvp)
gather_p.def_transpose(_gather_transpose)
gather_p.def_batch(lambda values, dims, **params: batch_gather(values[0], dims[0], values[1],
                                                               dims[1], **params))


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, unique_indices: bool = False,
           indices_are_sorted: bool = False, mode: str | GatherScatterMode | None = None,
           fill_value: Any = None) -> Any:
    """XLA's Gather, as ``jax.lax.gather`` (the last axis of ``start_indices`` is the index
    vector). Out-of-bounds windows follow ``mode`` (default 'fill': see the module doc)."""
    return gather_p.bind(
        operand, start_indices,
        dimension_numbers=_normalize_dnums(dimension_numbers, GatherDimensionNumbers),
        slice_sizes=tuple(int(s) for s in slice_sizes),
        mode=GatherScatterMode.from_any(mode).value, fill_value=fill_value,
        unique_indices=bool(unique_indices), indices_are_sorted=bool(indices_are_sorted))


def window_gather_params(slice_sizes: Sequence[int]) -> dict:
    """Params of a gather that reads one ``slice_sizes`` window at a full index vector
    (the gather form of ``dynamic_slice``: clamped, as XLA's DynamicSlice)."""
    every = tuple(range(len(slice_sizes)))
    return dict(dimension_numbers=GatherDimensionNumbers(every, (), every),
                slice_sizes=tuple(slice_sizes), mode=CLIP, fill_value=None,
                unique_indices=False, indices_are_sorted=True)


def take_along_axis(x: Any, indices: Any, axis: int, mode: str | None = CLIP) -> Any:
    """``x`` indexed along ``axis`` by ``indices`` (same shape as ``x`` except on ``axis``),
    as ``numpy.take_along_axis``: one gather whose other axes are batching axes."""
    from ember.ops.structural import reshape

    shape = aval_of(x).shape
    axis = canonical_axis(axis, len(shape), "take_along_axis")
    others = tuple(d for d in range(len(shape)) if d != axis)
    dnums = GatherDimensionNumbers((), (axis,), (axis,), others, others)
    vectors = reshape(indices, (*aval_of(indices).shape, 1))
    return gather(x, vectors, dnums, (1,) * len(shape), mode=mode)


# --- scatter --------------------------------------------------------------------------

def _scatter_window_sizes(dnums: ScatterDimensionNumbers, operand_rank: int,
                          updates_shape: tuple[int, ...]) -> tuple[int, ...]:
    sizes = [1] * operand_rank
    for dim, position in zip(_window_operand_dims(dnums, operand_rank),
                             dnums.update_window_dims):
        sizes[dim] = updates_shape[position]
    return tuple(sizes)


def _scatter_abstract(name: str) -> Callable:
    def rule(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *,
             dimension_numbers: ScatterDimensionNumbers, **_: Any) -> ShapedArray:
        dnums = _normalize_dnums(dimension_numbers, ScatterDimensionNumbers)
        _check_dnums(name, dnums, operand, indices, updates.ndim)
        if updates.dtype != operand.dtype:
            raise EmberTypeError(f"{name}: updates dtype {updates.dtype} differs from operand "
                                 f"dtype {operand.dtype}")
        scatter_axes = [p for p in range(updates.ndim) if p not in dnums.update_window_dims]
        expected = indices.shape[:-1]
        if tuple(updates.shape[p] for p in scatter_axes) != expected:
            raise EmberValueError(
                f"{name}: updates {updates.shape} must have the batch axes of indices "
                f"{indices.shape} (sizes {expected}) outside update_window_dims="
                f"{dnums.update_window_dims}")
        sizes = _scatter_window_sizes(dnums, operand.ndim, updates.shape)
        if any(s > d for s, d in zip(sizes, operand.shape)):
            raise EmberValueError(f"{name}: update windows of sizes {sizes} do not fit in "
                                  f"operand {operand.shape}")
        return operand

    return rule


def _scatter_impl(combine: Callable) -> Callable:
    def impl(operand, indices, updates, *, dimension_numbers, mode, **_: Any):
        out = np.array(operand, order="C", copy=True)  # C order: _overwrite writes a flat view
        indices, updates = np.asarray(indices), np.asarray(updates)
        dnums = _normalize_dnums(dimension_numbers, ScatterDimensionNumbers)
        sizes = _scatter_window_sizes(dnums, out.ndim, updates.shape)
        positions, in_bounds = _operand_positions(dnums, out.shape, sizes, indices,
                                                  updates.shape)
        if mode != CLIP:  # 'fill' and 'promise_in_bounds' drop out-of-bounds windows
            positions = tuple(p[in_bounds] for p in positions)
            updates = updates[in_bounds]
        combine(out, positions, updates)
        return out

    return impl


def _overwrite(out: np.ndarray, positions: tuple, updates: np.ndarray) -> None:
    """Write updates; where several hit one position the last (row-major) one wins."""
    flat = np.ravel_multi_index([np.ravel(p) for p in positions], out.shape)
    _, first_from_end = np.unique(flat[::-1], return_index=True)
    last = flat.size - 1 - first_from_end
    out.reshape(-1)[flat[last]] = np.ravel(updates)[last]


def _scatter_primitive(name: str, combine: Callable) -> Primitive:
    prim = Primitive(name)
    prim.def_abstract_eval(_scatter_abstract(name))
    prim.def_impl(_scatter_impl(combine))
    prim.def_batch(lambda values, dims, **params: batch_scatter(prim, values, dims, **params))
    return prim


scatter_p = _scatter_primitive("scatter", _overwrite)
scatter_add_p = _scatter_primitive("scatter_add", np.add.at)
scatter_mul_p = _scatter_primitive("scatter_mul", np.multiply.at)
scatter_min_p = _scatter_primitive("scatter_min", np.minimum.at)
scatter_max_p = _scatter_primitive("scatter_max", np.maximum.at)


def batch_scatter(prim: Primitive, values: Sequence[Any], dims: Sequence[int | None], *,
                  dimension_numbers: ScatterDimensionNumbers, **params: Any):
    """Batch rule of every scatter: all three operands get the batch axis in front
    (broadcast if absent) and the operand's is paired with the indices' as batching axes."""
    size = batch_size(values, dims)
    operand, indices, updates = (move_batch_axis(v, d, 0, size) for v, d in zip(values, dims))
    d = _normalize_dnums(dimension_numbers, ScatterDimensionNumbers)
    dnums = ScatterDimensionNumbers(_shift(d.update_window_dims), _shift(d.inserted_window_dims),
                                    _shift(d.scatter_dims_to_operand_dims),
                                    (0, *_shift(d.operand_batching_dims)),
                                    (0, *_shift(d.scatter_indices_batching_dims)))
    return prim.bind(operand, indices, updates, dimension_numbers=dnums, **params), 0


def window_scatter_params(rank: int) -> dict:
    """Params of a scatter that writes one whole-rank window at a full index vector (the
    scatter form of ``dynamic_update_slice``: clamped)."""
    every = tuple(range(rank))
    return dict(dimension_numbers=ScatterDimensionNumbers(every, (), every), mode=CLIP,
                unique_indices=True, indices_are_sorted=True)


def _gather_of_scatter(values: Any, indices: Any, updates_shape: tuple[int, ...], *,
                       dimension_numbers: ScatterDimensionNumbers, mode: str,
                       fill_value: Any = 0, **flags: Any) -> Any:
    """Read back, for every update element, the value at the operand position it was
    scattered to (the transpose of scatter_add; windows dropped by the scatter read
    ``fill_value``)."""
    dnums = _normalize_dnums(dimension_numbers, ScatterDimensionNumbers)
    sizes = _scatter_window_sizes(dnums, aval_of(values).ndim, updates_shape)
    return gather_p.bind(values, indices, dimension_numbers=GatherDimensionNumbers(*dnums),
                         slice_sizes=sizes, mode=CLIP if mode == CLIP else FILL,
                         fill_value=fill_value, **flags)


def _scatter_add_transpose(ct, operand, indices, updates, **params):
    ct_updates = None
    if is_undefined_primal(updates):
        ct_updates = _gather_of_scatter(ct, indices, updates.aval.shape, **params)
    return [ct if is_undefined_primal(operand) else None, None, ct_updates]


def_linear_jvp(scatter_add_p, linear_argnums=(0, 2))
scatter_add_p.def_transpose(_scatter_add_transpose)


def _full_like(value: Any, fill: Any, dtype: Any = None) -> Any:
    aval = aval_of(value)
    return broadcast_in_dim(np.asarray(fill, dtype or aval.dtype), aval.shape, ())


def _scatter_mul_jvp(primals, tangents, **params):
    from ember.ops.elementwise import mul

    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    tangent: Any = Zero.like(out)
    if not isinstance(t_operand, Zero):
        factors = scatter_mul_p.bind(_full_like(operand, 1), indices, updates, **params)
        tangent = mul(t_operand, factors)
    if not isinstance(t_updates, Zero):
        _require_unique("scatter_mul", "differentiated with respect to its updates", params)
        spread = scatter_add_p.bind(_full_like(operand, 0), indices, t_updates, **params)
        tangent = add_tangents(tangent, mul(operand, spread))
    return out, tangent


def _require_unique(name: str, action: str, params: dict) -> None:
    if not params["unique_indices"]:
        raise EmberValueError(
            f"{name} can be {action} only when its indices are unique: pass "
            "unique_indices=True (and make sure they are), or use a different formulation")


def _scatter_mul_transpose(ct, operand, indices, updates, **params):
    from ember.ops.elementwise import mul

    if is_undefined_primal(updates):
        raise EmberValueError("scatter_mul is not linear in its updates; it cannot be "
                              "transposed with respect to them")
    factors = scatter_mul_p.bind(_full_like(ct, 1), indices, updates, **params)
    return [mul(ct, factors), None, None]


_scatter_mul_jvp.accepts_symbolic_zeros = True  # type: ignore[attr-defined]
scatter_mul_p.def_jvp(_scatter_mul_jvp)
scatter_mul_p.def_transpose(_scatter_mul_transpose)


def _scatter_extremum_jvp(prim: Primitive) -> Callable:
    """Tangent of scatter_min / scatter_max: the tangent of whichever value won; ties
    (the operand or several updates equal to the result) share it equally."""

    def rule(primals, tangents, **params):
        from ember.ops.elementwise import bitwise_and, convert_element_type, div, eq, select_n

        (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
        out = prim.bind(operand, indices, updates, **params)
        read_back = _gather_of_scatter(out, indices, updates.shape, **params)
        operand_won = eq(operand, out)
        update_won = eq(updates, read_back)
        if params["mode"] != CLIP:  # a dropped update never wins
            landed = _gather_of_scatter(_full_like(out, True, dtypes.bool_), indices,
                                        updates.shape, **{**params, "fill_value": False})
            update_won = bitwise_and(update_won, landed)
        zeros_out, zeros_updates = _full_like(out, 0), _full_like(updates, 0)
        winners = scatter_add_p.bind(convert_element_type(operand_won, out.dtype), indices,
                                     convert_element_type(update_won, out.dtype), **params)
        total = scatter_add_p.bind(select_n(operand_won, zeros_out, t_operand), indices,
                                   select_n(update_won, zeros_updates, t_updates), **params)
        return out, div(total, winners)

    return rule


scatter_min_p.def_jvp(_scatter_extremum_jvp(scatter_min_p))
scatter_max_p.def_jvp(_scatter_extremum_jvp(scatter_max_p))
scatter_min_p.waive("transpose", "scatter_min is not linear")
scatter_max_p.waive("transpose", "scatter_max is not linear")


def _scatter_jvp(primals, tangents, **params):
    """Overwriting scatter: with unique indices it is linear. Otherwise (as JAX) tag each
    update with an id, scatter the ids to learn which update won each position, and
    express both output and tangent as scatter_adds of the winners."""
    from ember.ops.elementwise import add, eq, select_n
    from ember.ops.structural import reshape

    (operand, indices, updates), (t_operand, _, t_updates) = primals, tangents
    if params["unique_indices"]:
        return (scatter_p.bind(operand, indices, updates, **params),
                scatter_p.bind(t_operand, indices, t_updates, **params))
    dnums = _normalize_dnums(params["dimension_numbers"], ScatterDimensionNumbers)
    batch_shape = aval_of(indices).shape[:-1]
    count = int(np.prod(batch_shape, dtype=np.int64))
    ids = add(reshape(iota(dtypes.int32, count), batch_shape), 1)
    scatter_axes = [p for p in range(len(updates.shape)) if p not in dnums.update_window_dims]
    ids = broadcast_in_dim(ids, updates.shape, scatter_axes)
    landed_ids = scatter_p.bind(_full_like(operand, 0, dtypes.int32), indices, ids, **params)
    operand_kept = eq(landed_ids, 0)
    update_won = eq(ids, _gather_of_scatter(landed_ids, indices, updates.shape, **params))

    def combine(base, new):
        return scatter_add_p.bind(select_n(operand_kept, _full_like(base, 0), base), indices,
                                  select_n(update_won, _full_like(new, 0), new), **params)

    return combine(operand, updates), combine(t_operand, t_updates)


def _scatter_transpose(ct, operand, indices, updates, **params):
    _require_unique("scatter", "transposed", params)
    ct_operand = ct_updates = None
    if is_undefined_primal(operand):
        ct_operand = scatter_p.bind(ct, indices, zeros_like_aval(updates.aval), **params)
    if is_undefined_primal(updates):
        ct_updates = _gather_of_scatter(ct, indices, updates.aval.shape, **params)
    return [ct_operand, None, ct_updates]


scatter_p.def_jvp(_scatter_jvp)
scatter_p.def_transpose(_scatter_transpose)


def _scatter_function(prim: Primitive, doc: str) -> Callable:
    def fn(operand: Any, scatter_indices: Any, updates: Any,
           dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
           unique_indices: bool = False, mode: str | GatherScatterMode | None = None) -> Any:
        return prim.bind(
            operand, scatter_indices, updates,
            dimension_numbers=_normalize_dnums(dimension_numbers, ScatterDimensionNumbers),
            mode=GatherScatterMode.from_any(mode).value,
            indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))

    fn.__name__ = prim.name
    fn.__doc__ = (f"XLA's Scatter {doc}, as ``jax.lax.{prim.name}``. Out-of-bounds update "
                  "windows are dropped (mode 'fill', the default) or clamped ('clip').")
    return fn


scatter = _scatter_function(scatter_p, "(each update overwrites its position)")
scatter_add = _scatter_function(scatter_add_p, "adding updates into the operand")
scatter_mul = _scatter_function(scatter_mul_p, "multiplying updates into the operand")
scatter_min = _scatter_function(scatter_min_p, "keeping the minimum")
scatter_max = _scatter_function(scatter_max_p, "keeping the maximum")


for _prim in (gather_p, scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    _prim.waive("sharding", "indices may point anywhere: computed on whole operands")
