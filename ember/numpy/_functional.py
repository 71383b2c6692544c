"""Applying user functions to arrays: apply_along_axis, apply_over_axes, piecewise,
fromfunction.

As in JAX, the user's function is traced, not called per element or per slice:
``apply_along_axis`` maps it with ``vmap`` over the other axes, and ``piecewise``
evaluates every function on the whole input and selects elementwise, so all of them work
under jit and grad.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._manipulation import expand_dims, moveaxis
from ember.numpy._promotion import broadcast_to_shape, ensure_array

__all__ = ["apply_along_axis", "apply_over_axes", "piecewise", "fromfunction"]


def _check_callable(name: str, func: Any) -> None:
    if not callable(func):
        raise EmberTypeError(f"{name} needs a function, got {type(func).__name__}")


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any):
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis``; the dimensions of
    its result take the place of ``axis``."""
    from ember.transforms.api import vmap

    _check_callable("apply_along_axis", func1d)
    x = ensure_array(arr)
    if x.ndim == 0:
        raise EmberValueError("apply_along_axis needs an array with at least one axis, got a "
                              "0-d array")
    axis = canonicalize_axis(axis, x.ndim)

    def on_slice(row: Any) -> Any:
        return ensure_array(func1d(row, *args, **kwargs))

    mapped = on_slice
    for _ in range(x.ndim - 1):
        mapped = vmap(mapped)
    out = mapped(moveaxis(x, axis, -1))
    others = x.ndim - 1
    core = tuple(range(others, out.ndim))
    return moveaxis(out, core, tuple(range(axis, axis + len(core))))


def apply_over_axes(func: Callable, a: Any, axes: int | Sequence[int]):
    """``func(a, axis)`` for each axis in turn; a result that lost the axis gets it back
    (size 1), so the number of dimensions stays."""
    _check_callable("apply_over_axes", func)
    out = ensure_array(a)
    for axis in (axes if isinstance(axes, (list, tuple)) else (axes,)):
        axis = canonicalize_axis(axis, out.ndim)
        result = ensure_array(func(out, axis))
        if result.ndim == out.ndim - 1:
            result = expand_dims(result, axis)
        elif result.ndim != out.ndim:
            raise EmberValueError(f"apply_over_axes: func must keep the dimensions or drop the "
                                  f"axis, got shape {tuple(result.shape)} from shape "
                                  f"{tuple(out.shape)} and axis {axis}")
        out = result
    return out


def _conditions(condlist: Any, x: Any) -> Any:
    """The conditions as one bool array of shape ``(n, *x.shape)``."""
    conditions = ensure_array(condlist)
    if not dtypes.is_bool(conditions.dtype):
        raise EmberTypeError(f"piecewise: conditions must be booleans, got {conditions.dtype}")
    if conditions.ndim == x.ndim:
        conditions = expand_dims(conditions, 0)
    if tuple(conditions.shape[1:]) != tuple(x.shape):
        raise EmberValueError(f"piecewise: each condition must have the shape of x "
                              f"{tuple(x.shape)}, got conditions of shape "
                              f"{tuple(conditions.shape)}")
    return conditions


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any):
    """Where ``condlist[i]`` holds, ``funclist[i](x, *args, **kw)`` (or the constant
    ``funclist[i]``); where several hold, the last one; where none does, the extra last
    function if given, else 0. The result has ``x``'s dtype."""
    x = ensure_array(x)
    conditions = _conditions(condlist, x)
    n = conditions.shape[0]
    functions = list(funclist)
    if len(functions) not in (n, n + 1):
        raise EmberValueError(f"piecewise: {n} conditions need {n} or {n + 1} functions, got "
                              f"{len(functions)}")
    otherwise = functions.pop() if len(functions) == n + 1 else 0
    choice = ensure_array(0, dtypes.default_int())
    for i in range(n):
        choice = lax.select_n(conditions[i], broadcast_to_shape(choice, x.shape),
                              broadcast_to_shape(ensure_array(i + 1, choice.dtype), x.shape))
    cases = [_evaluate(f, x, args, kw) for f in (otherwise, *functions)]
    return lax.select_n(broadcast_to_shape(choice, x.shape), *cases)


def _evaluate(function: Any, x: Any, args: tuple, kwargs: dict) -> Any:
    value = function(x, *args, **kwargs) if callable(function) else function
    return broadcast_to_shape(ensure_array(value, x.dtype), x.shape)


def fromfunction(function: Callable, shape: Sequence[int], *, dtype: Any = float,
                 **kwargs: Any):
    """``function(*indices)`` where ``indices`` are the coordinate arrays of ``shape``
    (as ``indices(shape, dtype)``); the function is called once, on whole arrays."""
    from ember.numpy._index_tricks import indices

    _check_callable("fromfunction", function)
    return function(*indices(shape, dtype=dtype), **kwargs)
