"""Sorting primitives: multi-operand ``sort`` and ``top_k``.

``sort`` orders all its operands along one axis by the first ``num_keys`` of them
(lexicographically: the first key decides, later keys break ties). Order follows
NumPy: NaNs sort last, complex numbers by real then imaginary part, and -0.0 equals 0.0.
The reference sort is always stable. ``ember.numpy.argsort`` is ``sort`` with an iota
operand. ``top_k`` takes the ``k`` largest along the last axis, largest first, NaNs
counted as larger than every number and ties won by the lower index (as XLA).

Both are differentiable in their values: the tangents follow the permutation, one
gather of the tangent with the sorted indices.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops.indexing import take_along_axis
from ember.ops.rules import batch_size, move_batch_axis
from ember.ops.structural import broadcasted_iota, canonical_axis, transpose

__all__ = ["sort", "sort_key_val", "top_k"]


# --- sort -----------------------------------------------------------------------------

sort_p = Primitive("sort", multiple_results=True)


@sort_p.def_abstract_eval
def _sort_abstract(*operands: ShapedArray, dimension: int, is_stable: bool,
                   num_keys: int) -> list[ShapedArray]:
    if not operands:
        raise EmberValueError("sort needs at least one operand")
    shape = operands[0].shape
    if any(o.shape != shape for o in operands):
        raise EmberValueError(f"sort: operands must share one shape, got "
                              f"{[o.shape for o in operands]}")
    if not 1 <= num_keys <= len(operands):
        raise EmberValueError(f"sort: num_keys={num_keys} must be between 1 and the number "
                              f"of operands ({len(operands)})")
    if not 0 <= dimension < len(shape):
        raise EmberValueError(f"sort: dimension {dimension} is not an axis of shape {shape}")
    return list(operands)


def _sortable(key: np.ndarray) -> np.ndarray:
    """``key`` as NumPy orders it right: half-precision floats as float32 (exact), since
    NumPy's sort of ml_dtypes' bfloat16 does not put NaNs last."""
    if dtypes.is_floating(key.dtype) and key.dtype.itemsize < 4:
        return key.astype(np.float32)
    return key


def lexicographic_order(keys: Sequence[np.ndarray], axis: int) -> np.ndarray:
    """The stable permutation along ``axis`` that sorts by ``keys[0]``, then ``keys[1]``..."""
    order = np.broadcast_to(np.arange(keys[0].shape[axis]).reshape(
        [-1 if d == axis else 1 for d in range(keys[0].ndim)]), keys[0].shape)
    for key in reversed(keys):  # least significant key first; stability keeps its order
        step = np.argsort(np.take_along_axis(_sortable(key), order, axis), axis=axis,
                          kind="stable")
        order = np.take_along_axis(order, step, axis)
    return order


@sort_p.def_impl
def _sort_impl(*operands, dimension, is_stable, num_keys):
    operands = [np.asarray(o) for o in operands]
    order = lexicographic_order(operands[:num_keys], dimension)
    return [np.take_along_axis(o, order, dimension) for o in operands]


@sort_p.def_jvp
def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    positions = broadcasted_iota(dtypes.int32, primals[0].shape, dimension)
    *sorted_primals, order = sort_p.bind(*primals, positions, dimension=dimension,
                                         is_stable=is_stable, num_keys=num_keys)
    return sorted_primals, [take_along_axis(t, order, dimension)
                            if dtypes.is_inexact(t.dtype) else None for t in tangents]


@sort_p.def_batch
def _sort_batch(values, dims, *, dimension, is_stable, num_keys):
    size = batch_size(values, dims)
    moved = [move_batch_axis(v, d, 0, size) for v, d in zip(values, dims)]
    outs = sort_p.bind(*moved, dimension=dimension + 1, is_stable=is_stable,
                       num_keys=num_keys)
    return outs, [0] * len(outs)


sort_p.waive("transpose", "sort is not linear")


def sort(operand: Any | Sequence[Any], dimension: int = -1, is_stable: bool = True,
         num_keys: int = 1) -> Any:
    """Sort ``operand`` along ``dimension``; given a tuple/list of operands, sort all of
    them by the first ``num_keys`` and return a tuple (as ``jax.lax.sort``)."""
    several = isinstance(operand, (tuple, list))
    operands = list(operand) if several else [operand]
    if not operands:
        raise EmberValueError("sort needs at least one operand")
    dimension = canonical_axis(dimension, aval_of(operands[0]).ndim, "sort")
    outs = sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable),
                       num_keys=int(num_keys))
    return tuple(outs) if several else outs[0]


# --- top_k ----------------------------------------------------------------------------

top_k_p = Primitive("top_k", multiple_results=True)


@top_k_p.def_abstract_eval
def _top_k_abstract(x: ShapedArray, *, k: int) -> list[ShapedArray]:
    if x.ndim < 1:
        raise EmberValueError("top_k needs an operand of rank >= 1 (it works on the last axis)")
    if not 0 <= k <= x.shape[-1]:
        raise EmberValueError(f"top_k: k={k} must be between 0 and the size of the last axis "
                              f"of shape {x.shape}")
    if dtypes.is_complex(x.dtype):
        raise EmberTypeError(f"top_k does not order complex numbers (got {x.dtype})")
    shape = (*x.shape[:-1], k)
    return [ShapedArray(shape, x.dtype), ShapedArray(shape, dtypes.int32)]


@top_k_p.def_impl
def _top_k_impl(x, *, k):
    x = np.asarray(x)
    # A stable ascending sort of the reversed axis, read backwards, is descending with
    # ties in ascending index order; NaNs (last ascending) come first.
    ascending = np.argsort(_sortable(x)[..., ::-1], axis=-1, kind="stable")
    order = (x.shape[-1] - 1 - ascending[..., ::-1])[..., :k]
    return [np.take_along_axis(x, order, -1), order.astype(np.int32)]


@top_k_p.def_jvp
def _top_k_jvp(primals, tangents, *, k):
    (x,), (t,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k)
    return [values, indices], [take_along_axis(t, indices, -1), None]


@top_k_p.def_batch
def _top_k_batch(values, dims, *, k):
    (x,), (dim,) = values, dims
    outs = top_k_p.bind(move_batch_axis(x, dim, 0, np.shape(x)[dim]), k=k)
    return outs, [0, 0]


top_k_p.waive("transpose", "top_k is not linear")


def top_k(operand: Any, k: int, *, axis: int = -1) -> tuple[Any, Any]:
    """The ``k`` largest entries along ``axis`` (the last by default), largest first, and
    their int32 indices."""
    ndim = aval_of(operand).ndim
    axis = canonical_axis(axis, ndim, "top_k") if ndim else -1
    if axis in (-1, ndim - 1):
        values, indices = top_k_p.bind(operand, k=int(k))
        return values, indices
    to_last = [d for d in range(ndim) if d != axis] + [axis]
    back = tuple(int(i) for i in np.argsort(to_last))
    values, indices = top_k_p.bind(transpose(operand, to_last), k=int(k))
    return transpose(values, back), transpose(indices, back)


def sort_key_val(keys: Any, values: Any, dimension: int = -1,
                 is_stable: bool = True) -> tuple[Any, Any]:
    """``keys`` sorted along ``dimension`` and ``values`` permuted with them."""
    return sort((keys, values), dimension, is_stable, num_keys=1)


for _prim in (sort_p, top_k_p):
    _prim.waive("sharding", "not split yet: computed on whole operands")
