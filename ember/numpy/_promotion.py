"""Operands of ember.numpy functions: conversion, type promotion and broadcasting.

Every function of ``ember.numpy`` accepts Ember arrays, tracers, NumPy arrays, Python
scalars and nested sequences. Python scalars are *weak*: ``x + 1.0`` keeps the dtype of
``x`` (see ``ember.core.dtypes``); everything else takes part in promotion with its own
(canonicalized) dtype.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.trace import Tracer
from ember.errors import EmberTypeError, EmberValueError
from ember.lax import broadcast_in_dim, convert_element_type


def is_array(value: Any) -> bool:
    """True for Ember arrays and tracers (values that live in Ember, not in NumPy)."""
    from ember.runtime.array import Array

    return isinstance(value, (Array, Tracer))


class _ArrayType(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return is_array(instance)


class ndarray(metaclass=_ArrayType):
    """The type of Ember arrays, tracers included: ``isinstance(x, ember.numpy.ndarray)``
    holds inside jit and grad too (as ``jax.Array``)."""


def is_concrete(value: Any) -> bool:
    """True for Ember arrays that hold values (not tracers)."""
    from ember.runtime.array import Array

    return isinstance(value, Array)


def constant_like(value: Any, like: Any) -> Any:
    """``value`` as a constant of ``like``'s dtype and shape."""
    return broadcast_to_shape(np.asarray(value, like.dtype), like.shape)


def aval(value: Any) -> ShapedArray:
    if is_array(value):
        return value.aval
    if dtypes.is_weak_scalar(value):
        return ShapedArray((), dtypes.python_scalar_dtype(value))
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise EmberTypeError(f"cannot use {type(value).__name__} as an array: {error}") from None
    if array.dtype == object:
        raise EmberTypeError(f"cannot use {type(value).__name__} {value!r:.60} as an array "
                             "(it has no numeric dtype)")
    return ShapedArray(array.shape, dtypes.canonicalize(array.dtype))


def shape_of(value: Any) -> tuple[int, ...]:
    return aval(value).shape


def dtype_of(value: Any) -> np.dtype:
    return aval(value).dtype


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The NumPy broadcast of ``shapes`` (aligned from the right)."""
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
    return tuple(int(d) for d in result)


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts to exactly ``target``."""
    try:
        return broadcast_shapes(shape, target) == tuple(target)
    except EmberValueError:
        return False


def to_operand(value: Any, dtype: np.dtype) -> Any:
    """An operand of exactly ``dtype``: arrays are converted, other values become constants."""
    if is_array(value):
        return convert_element_type(value, dtype)
    if isinstance(value, (list, tuple)) and any(is_array(v) for v in _leaves(value)):
        from ember.numpy._creation import asarray

        return convert_element_type(asarray(value), dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(value, dtype=dtype)


def _leaves(value: Any):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def broadcast_to_shape(value: Any, shape: tuple[int, ...]) -> Any:
    current = shape_of(value)
    if current == shape:
        return value
    offset = len(shape) - len(current)
    if offset < 0:
        raise EmberValueError(f"cannot broadcast shape {current} to the smaller rank shape {shape}")
    return broadcast_in_dim(value, shape, tuple(range(offset, len(shape))))


def result_dtype(*args: Any) -> np.dtype:
    """Promoted dtype of operands (Python scalars weak, everything else strong)."""
    return dtypes.result_type(*[a if dtypes.is_weak_scalar(a) else dtype_of(a) for a in args])


def inexact_dtype(dtype: np.dtype) -> np.dtype:
    """``dtype`` if floating or complex, else a float as JAX 0.10 picks one: 64-bit
    integers become the default float, narrower integers and bools float32 (so
    ``jnp.mean`` of bools is float32 even with x64, as on JAX)."""
    if dtypes.is_inexact(dtype):
        return dtype
    if np.dtype(dtype).itemsize == 8:
        return dtypes.default_float()
    return dtypes.float32


def promote_args(*args: Any, dtype: np.dtype | None = None) -> list[Any]:
    """Promote to a common dtype (Python scalars are weak) and broadcast to a common shape."""
    common = dtype if dtype is not None else result_dtype(*args)
    shape = broadcast_shapes(*[shape_of(a) for a in args])
    return [broadcast_to_shape(to_operand(a, common), shape) for a in args]


def promote_args_inexact(*args: Any) -> list[Any]:
    """As ``promote_args``, then integers and bools go to the default float dtype."""
    return promote_args(*args, dtype=inexact_dtype(result_dtype(*args)))


def sequence_arg(value: Any, name: str, what: str = "a sequence of arrays") -> list[Any]:
    """The items of a sequence argument, or an error naming what ``name`` takes."""
    try:
        return list(value)
    except TypeError:
        raise EmberTypeError(f"{name} takes {what}, got {type(value).__name__}") from None


def ensure_array(value: Any, dtype: Any = None) -> Any:
    """An Ember array (or tracer) for ``value``, converted to ``dtype`` if one is given."""
    from ember.numpy._creation import asarray

    if is_array(value):
        return value if dtype is None else convert_element_type(value, dtype)
    return asarray(value, dtype=dtype)


def concrete(value: Any, what: str) -> np.ndarray:
    """The concrete value of ``value``, or an error saying why ``what`` needs one."""
    from ember.errors import ConcretizationError

    if isinstance(value, Tracer):
        try:
            return np.asarray(value.concrete_value())
        except ConcretizationError:
            raise ConcretizationError(
                f"{what} needs a concrete value, but got a traced array "
                f"{value.aval.str_short()}: the shape of the result depends on it. Under "
                "ember.jit, pass it as a static argument (static_argnums=...) or compute it "
                "with NumPy outside the traced function.") from None
    return np.asarray(value)
