"""Lowerings of the ATen ops whose result's shape (or Python value) depends on the input's
values: ``nonzero``, ``unique`` and its variants, ``masked_select``, ``bincount``,
``repeat_interleave`` by a tensor, and ``_local_scalar_dense`` (``Tensor.item``). No
static-shape program can compute them, so they run on concrete arrays only:
``ember.torch.stages`` compiles the graph around each of them and runs them between its
programs, with Ember's eager ops (as ``jnp.nonzero`` without ``size=`` runs outside
``jit``)."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch

import ember.numpy as jnp
from ember import lax
from ember.errors import EmberValueError
from ember.torch.lowerings.table import LOWERINGS, aten, dim_index, lowers

INDEX = np.dtype(np.int64)


def _none() -> Any:
    """ATen's stand-in for a result that was not asked for: an empty int64 tensor."""
    return jnp.zeros((0,), INDEX)


@lowers(aten.nonzero.default)
def _nonzero(x: Any) -> Any:
    return jnp.argwhere(x).astype(INDEX)


@lowers(aten._local_scalar_dense.default)
def _local_scalar_dense(x: Any) -> Any:
    return jnp.asarray(x).item()


def _unique(x: Any, return_inverse: bool, return_counts: bool, dim: int | None = None
            ) -> tuple[Any, Any, Any]:
    """Sorted unique values (or slices along ``dim``), ATen's way: NaNs are all distinct
    and the results not asked for are empty."""
    x = jnp.asarray(x)
    axis = None if dim is None else dim_index(dim, x.ndim)
    values, inverse, counts = jnp.unique(x, return_inverse=True, return_counts=True,
                                         axis=axis, equal_nan=False)
    if axis is None:
        inverse = inverse.reshape(x.shape)
    return (values, inverse.astype(INDEX) if return_inverse else _none(),
            counts.astype(INDEX) if return_counts else _none())


@lowers(aten._unique2.default)
def _unique2(x: Any, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
             return_counts: bool = False) -> tuple[Any, Any, Any]:
    return _unique(x, return_inverse, return_counts)  # (sorted on the CPU either way)


@lowers(aten._unique.default)
def _unique1(x: Any, sorted: bool = True, return_inverse: bool = False  # noqa: A002
             ) -> tuple[Any, Any]:
    return _unique(x, return_inverse, False)[:2]


@lowers(aten.unique_dim.default)
def _unique_dim(x: Any, dim: int, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
                return_counts: bool = False) -> tuple[Any, Any, Any]:
    return _unique(x, return_inverse, return_counts, dim)


@lowers(aten.unique_consecutive.default)
def _unique_consecutive(x: Any, return_inverse: bool = False, return_counts: bool = False,
                        dim: int | None = None) -> tuple[Any, Any, Any]:
    """The first of each run of equal values (or slices along ``dim``); NaNs are all
    distinct, as ATen's."""
    x = jnp.asarray(x)
    axis = None if dim is None else dim_index(dim, x.ndim)
    rows = x.reshape(-1, 1) if axis is None else jnp.moveaxis(x, axis, 0)
    rows = rows.reshape(rows.shape[0], -1)
    n = rows.shape[0]
    if n == 0:
        inverse = jnp.zeros(x.shape if dim is None else (0,), INDEX)
        return (x.reshape(-1) if dim is None else x,
                inverse if return_inverse else _none(), _none())
    differs = jnp.any(rows[1:] != rows[:-1], axis=1) if rows.shape[1] else \
        jnp.zeros((n - 1,), bool)
    first = jnp.concatenate([jnp.ones((1,), bool), differs])
    starts = jnp.flatnonzero(first)
    values = x.reshape(-1)[starts] if axis is None else jnp.take(x, starts, axis=axis)
    inverse = lax.cumsum(first.astype(INDEX), 0) - 1
    inverse = inverse.reshape(x.shape) if dim is None else inverse
    counts = jnp.diff(jnp.concatenate([starts, jnp.asarray([n])])).astype(INDEX)
    return (values, inverse if return_inverse else _none(),
            counts if return_counts else _none())


@lowers(aten.masked_select.default)
def _masked_select(x: Any, mask: Any) -> Any:
    x, mask = jnp.broadcast_arrays(x, mask)
    return x[mask]


@lowers(aten.bincount.default)
def _bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
    x = jnp.asarray(x)
    if x.ndim != 1 or (x.size and int(jnp.min(x)) < 0):
        raise EmberValueError("bincount takes a 1-d tensor of non-negative integers")
    length = max(int(jnp.max(x)) + 1 if x.size else 0, minlength)
    return jnp.bincount(x, weights, length=length)


@lowers(aten.repeat_interleave.Tensor)
def _repeat_interleave(repeats: Any, *, output_size: int | None = None) -> Any:
    """Each index ``i`` ``repeats[i]`` times (``repeat_interleave(x, repeats)``
    decomposes to this and an index by it)."""
    repeats = jnp.asarray(repeats)
    return jnp.repeat(jnp.arange(repeats.shape[0], dtype=INDEX), repeats,
                      total_repeat_length=output_size)


# --- what a graph computes from such values: sizes, tests on them, and their checks -------
# (concrete Python values once Ember traces the graph for the values it is called with)

for _test in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
              operator.and_, operator.or_, operator.not_):
    LOWERINGS[_test] = _test
LOWERINGS[torch.sym_not] = operator.not_
LOWERINGS[torch.sym_ite] = lambda condition, if_true, if_false: (
    if_true if condition else if_false)


@lowers(aten._assert_scalar.default)
def _assert_scalar(condition: Any, message: str) -> None:
    if not condition:
        raise EmberValueError(message)
