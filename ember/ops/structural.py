"""Shape-changing primitives: broadcast_in_dim, reshape, transpose (more to come)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberValueError

__all__ = ["broadcast_in_dim", "reshape", "transpose"]

broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_abstract(x: ShapedArray, *, shape: tuple[int, ...],
                        broadcast_dimensions: tuple[int, ...]) -> ShapedArray:
    if len(broadcast_dimensions) != x.ndim:
        raise EmberValueError(f"broadcast_in_dim: {x.ndim}-d operand needs {x.ndim} "
                              f"broadcast_dimensions, got {broadcast_dimensions}")
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


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    shape, dims = tuple(int(d) for d in shape), tuple(int(d) for d in broadcast_dimensions)
    if tuple(np.shape(x)) == shape and dims == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_abstract(x: ShapedArray, *, new_sizes: tuple[int, ...]) -> ShapedArray:
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise EmberValueError(f"cannot reshape array of shape {x.shape} (size {x.size}) "
                              f"into shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype)


@reshape_p.def_impl
def _reshape_impl(x, *, new_sizes):
    return np.reshape(x, new_sizes)


def reshape(x: Any, new_sizes: Sequence[int]) -> Any:
    new_sizes = tuple(int(d) for d in new_sizes)
    if tuple(np.shape(x)) == new_sizes:
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


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


def transpose(x: Any, permutation: Sequence[int]) -> Any:
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))):
        return x
    return transpose_p.bind(x, permutation=permutation)
