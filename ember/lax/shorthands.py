"""Shorthands of ``jax.lax`` built from its primitives: ``broadcast``, ``full``,
``select``, ``split``, ``stack`` and their kin. Each is a few primitive calls, so jit,
grad and vmap follow from those primitives' rules. As everywhere in ``lax``, operands
are not broadcast or promoted implicitly."""
from __future__ import annotations

import enum
import operator
from typing import Any, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import aval_of
from ember.core.pytree import tree_map
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import elementwise as ew
from ember.ops.structural import (
    broadcast_in_dim, canonical_axis, concatenate, expand_dims, index_in_dim, reshape,
    slice_in_dim)

__all__ = ["RoundingMethod", "broadcast", "broadcast_shapes", "broadcast_to_rank", "collapse", "complex",
           "empty", "full", "full_like", "optimization_barrier", "reciprocal", "scatter_sub",
           "select", "split", "stack", "tile", "unstack"]


class RoundingMethod(enum.IntEnum):
    """How ``lax.round`` rounds halves, as ``jax.lax.RoundingMethod``."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def _shape(shape: Any, op: str) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, or an error naming what it was."""
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise EmberTypeError(f"{op}: shape must be a sequence of integers, got "
                             f"{type(shape).__name__} {shape!r}") from None


def broadcast(operand: Any, sizes: Sequence[int]) -> Any:
    """``operand`` with new leading axes of ``sizes``."""
    shape = tuple(int(s) for s in sizes) + tuple(aval_of(operand).shape)
    return broadcast_in_dim(operand, shape, tuple(range(len(sizes), len(shape))))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy's broadcasting gives ``shapes`` (as ``jax.lax.broadcast_shapes``)."""
    shapes = [_shape(s, "broadcast_shapes") for s in shapes]
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise EmberValueError(f"Incompatible shapes for broadcasting: shapes="
                              f"{[tuple(s) for s in shapes]}") from None


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """``x`` with leading axes of size 1 up to ``rank`` axes."""
    ndim = aval_of(x).ndim
    rank = operator.index(rank)
    if rank < ndim:
        raise EmberValueError(f"broadcast_to_rank: rank {rank} is below the operand's rank "
                              f"{ndim}")
    return x if rank == ndim else broadcast(x, (1,) * (rank - ndim))


def _scalar_of(value: Any, dtype: Any) -> Any:
    if dtype is None:
        dtype = aval_of(value).dtype
    dtype = dtypes.canonicalize(dtype)
    if dtypes.is_weak_scalar(value) or isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value, dtype)
    return ew.convert_element_type(value, dtype)


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with the scalar ``fill_value`` (of its dtype unless
    ``dtype`` is given)."""
    value = _scalar_of(fill_value, dtype)
    if np.shape(value) != ():
        raise EmberValueError(f"full: fill_value must be a scalar, got shape "
                              f"{np.shape(value)}")
    return broadcast_in_dim(value, _shape(shape, "full"), ())


def full_like(x: Any, fill_value: Any, dtype: Any = None,
              shape: Sequence[int] | None = None) -> Any:
    """``full`` with the shape and dtype of ``x`` unless given."""
    aval = aval_of(x)
    return full(aval.shape if shape is None else shape, fill_value,
                aval.dtype if dtype is None else dtype)


def empty(shape: Sequence[int], dtype: Any) -> Any:
    """An array of ``shape`` and ``dtype`` whose values do not matter (zeros here)."""
    return full(shape, 0, dtype)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` holds, else ``on_false`` (shapes equal, or ``pred`` a
    scalar)."""
    return ew.select_n(pred, on_false, on_true)


def reciprocal(x: Any) -> Any:
    """``1 / x``."""
    return ew.integer_pow(x, -1)


def complex(x: Any, y: Any) -> Any:
    """``x + 1j * y`` from real parts of one dtype (complex64 from float32)."""
    dtype = aval_of(x).dtype
    if not dtypes.is_floating(dtype) or aval_of(y).dtype != dtype:
        raise EmberValueError(f"complex needs two real floating operands of one dtype, got "
                              f"{dtype} and {aval_of(y).dtype}")
    complex_dtype = np.result_type(dtype, np.complex64)
    real = ew.convert_element_type(x, complex_dtype)
    imaginary = ew.convert_element_type(y, complex_dtype)
    unit = broadcast_in_dim(np.asarray(1j, complex_dtype), aval_of(y).shape, ())
    return ew.add(real, ew.mul(imaginary, unit))


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along each axis ``i``."""
    shape = tuple(aval_of(operand).shape)
    reps = tuple(int(r) for r in reps)
    if len(reps) != len(shape):
        raise EmberValueError(f"tile: reps {reps} needs one entry per axis of the operand "
                              f"{shape}")
    interleaved = tuple(d for pair in zip(reps, shape) for d in pair)
    spread = broadcast_in_dim(operand, interleaved, tuple(range(1, 2 * len(shape), 2)))
    return reshape(spread, tuple(r * d for r, d in zip(reps, shape)))


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """Consecutive pieces of ``sizes`` along ``axis`` (the sizes must add up to it)."""
    shape = tuple(aval_of(operand).shape)
    axis = canonical_axis(axis, len(shape), "split")
    sizes = [int(s) for s in sizes]
    if sum(sizes) != shape[axis]:
        raise EmberValueError(f"split: sizes {sizes} add up to {sum(sizes)}, but axis {axis} "
                              f"of shape {shape} has {shape[axis]}")
    starts = np.cumsum([0, *sizes])
    return [slice_in_dim(operand, int(a), int(b), 1, axis)
            for a, b in zip(starts[:-1], starts[1:])]


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """Axes ``start_dimension`` up to (not including) ``stop_dimension`` merged into one."""
    shape = tuple(aval_of(operand).shape)
    start = canonical_axis(start_dimension, len(shape), "collapse")
    stop = len(shape) if stop_dimension is None else (
        stop_dimension + len(shape) if stop_dimension < 0 else stop_dimension)
    if not start <= stop <= len(shape):
        raise EmberValueError(f"collapse: dimensions [{start_dimension}, {stop_dimension}) "
                              f"are not a range of axes of shape {shape}")
    merged = int(np.prod(shape[start:stop], dtype=np.int64))
    return reshape(operand, shape[:start] + (merged,) + shape[stop:])


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """The operands (of one shape) along a new axis ``axis``."""
    if not isinstance(operands, (list, tuple)):
        raise EmberTypeError(f"stack takes a sequence of arrays, got "
                             f"{type(operands).__name__}")
    operands = list(operands)
    if not operands:
        raise EmberValueError("stack needs at least one operand")
    axis = canonical_axis(axis, aval_of(operands[0]).ndim + 1, "stack")
    return concatenate([expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``, that axis removed."""
    shape = tuple(aval_of(x).shape)
    axis = canonical_axis(axis, len(shape), "unstack")
    return tuple(index_in_dim(x, i, axis, keepdims=False) for i in range(shape[axis]))


def optimization_barrier(operand: Any) -> Any:
    """``operand`` (a pytree of arrays) unchanged. XLA keeps computations from moving
    across this point; Ember's compiler has no such motion to block, so it is the
    identity."""
    tree_map(aval_of, operand)  # an error for a leaf that is not an array
    return operand


def scatter_sub(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                mode: Any = None) -> Any:
    """XLA's Scatter subtracting updates from the operand, as ``jax.lax.scatter_sub``:
    ``scatter_add`` of the negated updates (so its derivatives are ``scatter_add``'s)."""
    from ember.ops.indexing import scatter_add

    return scatter_add(operand, scatter_indices, ew.neg(updates), dimension_numbers,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode)
