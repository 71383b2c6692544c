"""``approx_max_k`` / ``approx_min_k`` of ``jax.lax``: the ``k`` largest / smallest entries
along an axis and their indices. JAX's are approximate on TPUs only; elsewhere they are
exact, and so are these (recall 1, whatever ``recall_target`` asks)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core.abstract import aval_of
from ember.errors import EmberValueError
from ember.ops.sorting import sort, top_k
from ember.ops.structural import broadcast_in_dim, canonical_axis, iota, slice_in_dim

__all__ = ["approx_max_k", "approx_min_k"]


def _axis(operand: Any, k: int, reduction_dimension: int, op: str) -> int:
    shape = aval_of(operand).shape
    axis = canonical_axis(reduction_dimension, len(shape), op)
    if not 0 <= int(k) <= shape[axis]:
        raise EmberValueError(f"{op}: k must be at most the size of reduction_dimension "
                              f"{axis} ({shape[axis]}), got {k}")
    return axis


def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` largest entries along ``reduction_dimension``, largest first (NaN above
    all), and their int32 indices, as ``jax.lax.approx_max_k`` off TPUs: exact."""
    axis = _axis(operand, k, reduction_dimension, "approx_max_k")
    return top_k(operand, int(k), axis=axis)


def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The ``k`` smallest entries along ``reduction_dimension``, smallest first (NaN after
    all), and their int32 indices, as ``jax.lax.approx_min_k`` off TPUs: exact."""
    axis = _axis(operand, k, reduction_dimension, "approx_min_k")
    shape = tuple(aval_of(operand).shape)
    positions = broadcast_in_dim(iota(np.int32, shape[axis]), shape, (axis,))
    values, indices = sort((operand, positions), dimension=axis, num_keys=1)
    return (slice_in_dim(values, 0, int(k), axis=axis),
            slice_in_dim(indices, 0, int(k), axis=axis))
