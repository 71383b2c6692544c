"""Reductions over a set of axes (sum, max, min, prod, and, or, xor) and argmax / argmin.

Each monoid reduction is a row in ``REDUCTIONS``: its NumPy ufunc, the dtypes it accepts
and its identity, so that fusion and code generators can look up how to start and
combine an accumulator. Reducing an empty axis gives the identity (``-inf`` for max of
floats), as in XLA. NaN wins in max / min, as in NumPy; argmax / argmin return the index
of the first NaN.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.ops.elementwise import convert_element_type, div, eq, mul
from ember.ops.sharding_rules import ShardingDecision, ShardingQuery, mapped_sharding
from ember.ops.structural import broadcast_in_dim, concatenate, reshape, slice_in_dim, transpose
from ember.ops.rules import UndefinedPrimal, Zero, deflinear, defjvp_zero, zeros_like_aval

__all__ = [
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
    "reduce_xor", "argmax", "argmin",
]


@dataclass(frozen=True)
class Monoid:
    """How a reduction combines values: the NumPy ufunc and the identity per dtype."""

    ufunc: np.ufunc
    accepts: Callable[[np.dtype], bool]
    identity: Callable[[np.dtype], Any]
    accepted_text: str


def _lowest(dtype: np.dtype) -> Any:
    if dtypes.is_bool(dtype):
        return False
    if dtypes.is_integer(dtype):
        return np.iinfo(dtype).min
    return -np.inf


def _highest(dtype: np.dtype) -> Any:
    if dtypes.is_bool(dtype):
        return True
    if dtypes.is_integer(dtype):
        return np.iinfo(dtype).max
    return np.inf


def _all_ones(dtype: np.dtype) -> Any:
    return ~np.zeros((), dtype)


def _is_number(dtype: np.dtype) -> bool:
    return not dtypes.is_bool(dtype)


def _is_ordered(dtype: np.dtype) -> bool:
    return not dtypes.is_complex(dtype)


def _is_bitwise(dtype: np.dtype) -> bool:
    return dtypes.is_integer(dtype) or dtypes.is_bool(dtype)


_NUMBERS = "numeric dtypes (not bool)"
_ORDERED = "bool, integer or real floating dtypes (not complex)"
_BITWISE = "integer or bool dtypes"

# name -> monoid; the primitive of each is ``REDUCTIONS[name]``.
MONOIDS: dict[str, Monoid] = {
    "reduce_sum": Monoid(np.add, _is_number, lambda d: 0, _NUMBERS),
    "reduce_prod": Monoid(np.multiply, _is_number, lambda d: 1, _NUMBERS),
    "reduce_max": Monoid(np.maximum, _is_ordered, _lowest, _ORDERED),
    "reduce_min": Monoid(np.minimum, _is_ordered, _highest, _ORDERED),
    "reduce_and": Monoid(np.bitwise_and, _is_bitwise, _all_ones, _BITWISE),
    "reduce_or": Monoid(np.bitwise_or, _is_bitwise, lambda d: 0, _BITWISE),
    "reduce_xor": Monoid(np.bitwise_xor, _is_bitwise, lambda d: 0, _BITWISE),
}

# Every reduction primitive, by name: fusion and renderers look them up here.
REDUCTIONS: dict[str, Primitive] = {}


def check_axes(name: str, shape: tuple[int, ...], axes: Sequence[int]) -> None:
    """Axes must be distinct, non-negative and in range for ``shape``."""
    for axis in axes:
        if not isinstance(axis, (int, np.integer)) or not 0 <= axis < len(shape):
            raise EmberIndexError(f"{name}: axis {axis} is out of range for an operand of "
                                  f"shape {shape} (rank {len(shape)})")
    if len(set(axes)) != len(axes):
        raise EmberValueError(f"{name}: repeated axis in axes={tuple(axes)}")


def normalize_axis(name: str, axis: int, ndim: int) -> int:
    """A user's axis (possibly negative) as a non-negative index; errors name the rank."""
    try:
        axis = int(axis)
    except TypeError:
        raise EmberTypeError(f"{name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise EmberIndexError(f"{name}: axis {axis} is out of range for an operand of "
                              f"rank {ndim}")
    return axis % ndim


def _normalize_axes(name: str, axes: Sequence[int], ndim: int) -> tuple[int, ...]:
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(normalize_axis(name, axis, ndim) for axis in axes)


def _reduced_shape(shape: tuple[int, ...], axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """Half-precision sums and products accumulate in float32, as XLA does on CPU."""
    return dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype


def _monoid_reduction(name: str) -> Primitive:
    monoid = MONOIDS[name]
    prim = Primitive(name)
    REDUCTIONS[name] = prim

    @prim.def_abstract_eval
    def _abstract(x: ShapedArray, *, axes: tuple[int, ...]) -> ShapedArray:
        if not monoid.accepts(x.dtype):
            raise EmberTypeError(f"{name} does not accept dtype {x.dtype} (needs "
                                 f"{monoid.accepted_text})")
        check_axes(name, x.shape, axes)
        return ShapedArray(_reduced_shape(x.shape, axes), x.dtype)

    @prim.def_impl
    def _impl(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
        x = np.asarray(x)
        acc = accumulator_dtype(x.dtype)
        identity = np.asarray(monoid.identity(x.dtype)).astype(acc)
        with np.errstate(all="ignore"):
            out = monoid.ufunc.reduce(x.astype(acc, copy=False), axis=tuple(axes),
                                      dtype=acc, initial=identity)
        return np.asarray(out).astype(x.dtype, copy=False)

    return prim


reduce_sum_p = _monoid_reduction("reduce_sum")
reduce_prod_p = _monoid_reduction("reduce_prod")
reduce_max_p = _monoid_reduction("reduce_max")
reduce_min_p = _monoid_reduction("reduce_min")
reduce_and_p = _monoid_reduction("reduce_and")
reduce_or_p = _monoid_reduction("reduce_or")
reduce_xor_p = _monoid_reduction("reduce_xor")


def _bind_reduction(prim: Primitive, operand: Any, axes: Sequence[int]) -> Any:
    axes = _normalize_axes(prim.name, axes, aval_of(operand).ndim)  # aval_of: not an array?
    if not axes:
        return operand
    return prim.bind(operand, axes=axes)


def reduce_sum(operand: Any, axes: Sequence[int]) -> Any:
    """Sum over ``axes`` (half precision accumulates in float32)."""
    return _bind_reduction(reduce_sum_p, operand, axes)


def reduce_prod(operand: Any, axes: Sequence[int]) -> Any:
    """Product over ``axes``."""
    return _bind_reduction(reduce_prod_p, operand, axes)


def reduce_max(operand: Any, axes: Sequence[int]) -> Any:
    """Maximum over ``axes``; NaN wins; an empty reduction gives the dtype's lowest value."""
    return _bind_reduction(reduce_max_p, operand, axes)


def reduce_min(operand: Any, axes: Sequence[int]) -> Any:
    """Minimum over ``axes``; NaN wins; an empty reduction gives the dtype's highest value."""
    return _bind_reduction(reduce_min_p, operand, axes)


def reduce_and(operand: Any, axes: Sequence[int]) -> Any:
    """Bitwise (logical for bool) and over ``axes``."""
    return _bind_reduction(reduce_and_p, operand, axes)


def reduce_or(operand: Any, axes: Sequence[int]) -> Any:
    """Bitwise (logical for bool) or over ``axes``."""
    return _bind_reduction(reduce_or_p, operand, axes)


def reduce_xor(operand: Any, axes: Sequence[int]) -> Any:
    """Bitwise (logical for bool) exclusive or over ``axes``."""
    return _bind_reduction(reduce_xor_p, operand, axes)


# --- argmax / argmin ---------------------------------------------------------------------

def _index_reduction(name: str, numpy_fn: Callable) -> Primitive:
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract(x: ShapedArray, *, axis: int, index_dtype: np.dtype) -> ShapedArray:
        if not _is_ordered(x.dtype):
            raise EmberTypeError(f"{name} does not accept dtype {x.dtype} (needs {_ORDERED})")
        if not dtypes.is_integer(index_dtype):
            raise EmberTypeError(f"{name}: index_dtype must be an integer dtype, got "
                                 f"{index_dtype}")
        check_axes(name, x.shape, (axis,))
        if x.shape[axis] == 0:
            raise EmberValueError(f"{name} of an empty axis: axis {axis} of shape {x.shape} "
                                  "has size 0, so there is no index to return")
        return ShapedArray(_reduced_shape(x.shape, (axis,)), index_dtype)

    @prim.def_impl
    def _impl(x: np.ndarray, *, axis: int, index_dtype: np.dtype) -> np.ndarray:
        return numpy_fn(np.asarray(x), axis=axis).astype(index_dtype)

    return prim


argmax_p = _index_reduction("argmax", np.argmax)
argmin_p = _index_reduction("argmin", np.argmin)


def _bind_index_reduction(prim: Primitive, operand: Any, axis: int, index_dtype: Any) -> Any:
    axis = normalize_axis(prim.name, axis, len(np.shape(operand)))
    return prim.bind(operand, axis=axis, index_dtype=dtypes.canonicalize(index_dtype))


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    """Index of the largest value along ``axis`` (the first on ties; NaN counts as largest)."""
    return _bind_index_reduction(argmax_p, operand, axis, index_dtype)


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    """Index of the smallest value along ``axis`` (the first on ties; NaN counts as smallest)."""
    return _bind_index_reduction(argmin_p, operand, axis, index_dtype)


# --- transformation rules ----------------------------------------------------------------

def _kept_axes(ndim: int, axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(d for d in range(ndim) if d not in axes)


def _reduce_sum_transpose(ct: Any, x: UndefinedPrimal, *, axes: tuple[int, ...]) -> list:
    return [broadcast_in_dim(ct, x.shape, _kept_axes(x.ndim, axes))]


deflinear(reduce_sum_p, _reduce_sum_transpose)


def _def_chooser_jvp(prim: Primitive) -> None:
    """max / min: the tangent is the mean of the tangents at the chosen (tied) positions."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], *, axes: tuple[int, ...]):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axes=axes)
        if not dtypes.is_inexact(x.dtype):
            return out, Zero.like(out)
        chosen = eq(x, broadcast_in_dim(out, x.shape, _kept_axes(x.ndim, axes)))
        chosen = convert_element_type(chosen, x.dtype)
        return out, div(reduce_sum(mul(t, chosen), axes), reduce_sum(chosen, axes))

    prim.def_jvp(rule)


def products_of_others(x: Any, axes: tuple[int, ...]) -> Any:
    """For each element, the product of the other elements it is reduced with over
    ``axes``: exclusive running products from both ends, so zeros need no division."""
    from ember.ops.cumulative import cumprod

    kept = _kept_axes(x.ndim, axes)
    moved = transpose(x, axes + kept)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if n == 0:
        return zeros_like_aval(aval_of(x))
    flat = reshape(moved, (n, *moved.shape[len(axes):]))
    one = broadcast_in_dim(np.ones((), x.dtype), (1, *flat.shape[1:]), ())
    before = concatenate([one, slice_in_dim(cumprod(flat, 0), 0, n - 1)], 0)
    after = concatenate([slice_in_dim(cumprod(flat, 0, reverse=True), 1, n), one], 0)
    others = reshape(mul(before, after), moved.shape)
    return transpose(others, tuple(np.argsort(axes + kept)))


def _reduce_prod_jvp(primals: Sequence[Any], tangents: Sequence[Any], *,
                     axes: tuple[int, ...]):
    (x,), (t,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes)
    return out, reduce_sum(mul(t, products_of_others(x, axes)), axes)


_def_chooser_jvp(reduce_max_p)
_def_chooser_jvp(reduce_min_p)
reduce_prod_p.def_jvp(_reduce_prod_jvp)
for _prim in (reduce_and_p, reduce_or_p, reduce_xor_p, argmax_p, argmin_p):
    defjvp_zero(_prim)  # integer / bool results carry no tangent
for _prim in (reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p,
              reduce_xor_p, argmax_p, argmin_p):
    _prim.waive("transpose", "not linear")


def _unbatched_axis(axis: int, batch_dim: int) -> int:
    """Where a logical axis of the unbatched operand sits once ``batch_dim`` is inserted."""
    return axis + (axis >= batch_dim)


def _batch_monoid(values: Sequence[Any], dims: Sequence[int | None], *, prim: Primitive,
                  axes: tuple[int, ...]):
    (x,), (d,) = values, dims
    moved = tuple(_unbatched_axis(a, d) for a in axes)
    return prim.bind(x, axes=moved), d - sum(a < d for a in axes)


def _batch_index(values: Sequence[Any], dims: Sequence[int | None], *, prim: Primitive,
                 axis: int, index_dtype: np.dtype):
    (x,), (d,) = values, dims
    out = prim.bind(x, axis=_unbatched_axis(axis, d), index_dtype=index_dtype)
    return out, d - (axis < d)


for _prim in REDUCTIONS.values():
    _prim.def_batch(functools.partial(_batch_monoid, prim=_prim))
for _prim in (argmax_p, argmin_p):
    _prim.def_batch(functools.partial(_batch_index, prim=_prim))


# --- sharding rules ----------------------------------------------------------------------

def _reduction_sharding(combine: str | None):
    """Kept dimensions keep their split. A split reduced dimension leaves each shard a
    partial result, combined across shards with ``combine`` (psum / pmax / pmin); a
    reduction with no such collective keeps its reduced dimensions whole."""
    def rule(query: ShardingQuery) -> ShardingDecision:
        axes = set(query.params["axes"] if "axes" in query.params else (query.params["axis"],))
        kept = [d for d in range(query.in_avals[0].ndim) if d not in axes]
        mapping: list[int | None] = [None] * query.in_avals[0].ndim
        for o, d in enumerate(kept):
            mapping[d] = o
        partial = sorted(axes) if combine else ()
        return mapped_sharding(query, [mapping], partial=partial, reduce=combine or "sum")
    return rule


for _prim, _combine in ((reduce_sum_p, "sum"), (reduce_max_p, "max"), (reduce_min_p, "min"),
                        (reduce_prod_p, None), (reduce_and_p, None), (reduce_or_p, None),
                        (reduce_xor_p, None), (argmax_p, None), (argmin_p, None)):
    _prim.def_sharding(_reduction_sharding(_combine))
