"""Broadcasting and type promotion of ember.numpy operands before a primitive is bound."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.trace import Tracer
from ember.errors import EmberValueError
from ember.lax import broadcast_in_dim, convert_element_type


def is_array(value: Any) -> bool:
    from ember.runtime.array import Array

    return isinstance(value, (Array, Tracer))


def aval(value: Any) -> ShapedArray:
    if is_array(value):
        return value.aval
    if dtypes.is_weak_scalar(value):
        return ShapedArray((), dtypes.python_scalar_dtype(value))
    array = np.asarray(value)
    return ShapedArray(array.shape, dtypes.canonicalize(array.dtype))


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, start=ndim - len(shape)):
            if size != 1 and result[i] not in (1, size):
                raise EmberValueError(
                    f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be "
                    "broadcast together (dimensions must be equal or 1, aligned from the right)")
            if size != 1:
                result[i] = size
    return tuple(result)


def to_operand(value: Any, dtype: np.dtype) -> Any:
    """An operand of exactly ``dtype``: arrays are converted, other values become constants."""
    if is_array(value):
        return convert_element_type(value, dtype)
    return np.asarray(value, dtype=dtype)


def broadcast_to_shape(value: Any, shape: tuple[int, ...]) -> Any:
    current = tuple(np.shape(value)) if not is_array(value) else value.shape
    if current == shape:
        return value
    offset = len(shape) - len(current)
    return broadcast_in_dim(value, shape, tuple(range(offset, len(shape))))


def promote_args(*args: Any, dtype: np.dtype | None = None) -> list[Any]:
    """Promote to a common dtype (Python scalars are weak) and broadcast to a common shape."""
    common = dtype if dtype is not None else dtypes.result_type(
        *[a if dtypes.is_weak_scalar(a) else aval(a).dtype for a in args])
    shape = broadcast_shapes(*[aval(a).shape for a in args])
    return [broadcast_to_shape(to_operand(a, common), shape) for a in args]
