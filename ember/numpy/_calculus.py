"""Finite differences and sums over sampled functions: gradient, trapezoid, unwrap.

``gradient`` uses second-order central differences inside and first- or second-order
one-sided ones at the edges (``edge_order``), for uniform spacing or coordinate arrays,
as NumPy (JAX supports ``edge_order=1`` only).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ember import lax
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axes, canonicalize_axis
from ember.numpy._cumulative import cumsum, diff
from ember.numpy._joining import concatenate
from ember.numpy._manipulation import moveaxis
from ember.numpy._math import remainder, true_divide, where
from ember.numpy._promotion import ensure_array, inexact_dtype, promote_args_inexact
from ember.numpy._reductions import sum as sum_
from ember.numpy._ufuncs import (
    abs as abs_, add, equal, greater, less, logical_and, maximum, multiply, negative, subtract,
)

__all__ = ["gradient", "trapezoid", "unwrap"]


def _spacings(varargs: tuple, axes: tuple[int, ...], shape: tuple[int, ...],
              dtype: Any) -> list[Any]:
    """One spacing per axis: a scalar step or a 1-D coordinate array of the axis' size."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and not ensure_array(varargs[0]).ndim:
        return [varargs[0]] * len(axes)
    if len(varargs) != len(axes):
        raise EmberValueError(f"gradient: give one spacing, or one per axis ({len(axes)}), got "
                              f"{len(varargs)}")
    out = []
    for spacing, axis in zip(varargs, axes):
        step = ensure_array(spacing, dtype)
        if step.ndim > 1 or (step.ndim == 1 and step.shape[0] != shape[axis]):
            raise EmberValueError(f"gradient: coordinates along axis {axis} must be a scalar or "
                                  f"1-D of length {shape[axis]}, got shape {tuple(step.shape)}")
        out.append(step if step.ndim else spacing)
    return out


def _uniform_derivative(f: Any, h: Any, edge_order: int) -> Any:
    """d f / dx along axis 0 for a constant step ``h``."""
    interior = true_divide(subtract(f[2:], f[:-2]), multiply(2.0, h))
    if edge_order == 1:
        first = true_divide(subtract(f[1:2], f[:1]), h)
        last = true_divide(subtract(f[-1:], f[-2:-1]), h)
    else:
        first = true_divide(add(add(multiply(-1.5, f[:1]), multiply(2.0, f[1:2])),
                                multiply(-0.5, f[2:3])), h)
        last = true_divide(add(add(multiply(0.5, f[-3:-2]), multiply(-2.0, f[-2:-1])),
                               multiply(1.5, f[-1:])), h)
    return concatenate([first, interior, last])


def _weighted(f_parts: Sequence[Any], weights: Sequence[Any], ndim: int) -> Any:
    """``sum(w * f)`` with 1-D weights along axis 0 of the ``f`` slices."""
    total = None
    for part, w in zip(f_parts, weights):
        w = lax.broadcast_in_dim(w, (w.shape[0], *(1,) * (ndim - 1)), (0,))
        term = multiply(w, part)
        total = term if total is None else add(total, term)
    return total


def _coordinate_derivative(f: Any, x: Any, edge_order: int) -> Any:
    """d f / dx along axis 0 at the sample coordinates ``x`` (1-D, any spacing): the
    derivative of the parabola through each point and its neighbours."""
    dx = diff(x)
    d1, d2 = dx[:-1], dx[1:]
    interior = _weighted((f[:-2], f[1:-1], f[2:]),
                         (negative(true_divide(d2, multiply(d1, add(d1, d2)))),
                          true_divide(subtract(d2, d1), multiply(d1, d2)),
                          true_divide(d1, multiply(d2, add(d1, d2)))), f.ndim)
    if edge_order == 1:
        first = true_divide(subtract(f[1:2], f[:1]), dx[:1])
        last = true_divide(subtract(f[-1:], f[-2:-1]), dx[-1:])
    else:
        a, b = dx[:1], dx[1:2]
        first = _weighted((f[:1], f[1:2], f[2:3]),
                          (negative(true_divide(add(multiply(2.0, a), b), multiply(a, add(a, b)))),
                           true_divide(add(a, b), multiply(a, b)),
                           negative(true_divide(a, multiply(b, add(a, b))))), f.ndim)
        a, b = dx[-2:-1], dx[-1:]
        last = _weighted((f[-3:-2], f[-2:-1], f[-1:]),
                         (true_divide(b, multiply(a, add(a, b))),
                          negative(true_divide(add(a, b), multiply(a, b))),
                          true_divide(add(multiply(2.0, b), a), multiply(b, add(a, b)))),
                         f.ndim)
    return concatenate([first, interior, last])


def gradient(f: Any, *varargs: Any, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None):
    """The derivative of sampled ``f`` along each axis (or ``axis``): one array, or a
    list with one per axis. ``varargs``: one step for all axes, or per axis a step or the
    sample coordinates."""
    edge_order = 1 if edge_order is None else edge_order
    if edge_order not in (1, 2):
        raise EmberValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    values = ensure_array(f)
    values = lax.convert_element_type(values, inexact_dtype(values.dtype))
    axes = canonicalize_axes(axis, values.ndim)
    spacings = _spacings(varargs, axes, values.shape, values.dtype)
    out = []
    for ax, spacing in zip(axes, spacings):
        if values.shape[ax] < edge_order + 1:
            raise EmberValueError(f"gradient: axis {ax} of shape {tuple(values.shape)} needs at "
                                  f"least edge_order + 1 = {edge_order + 1} samples")
        moved = moveaxis(values, ax, 0)
        coordinates = getattr(spacing, "ndim", 0)
        derivative = (_coordinate_derivative(moved, spacing, edge_order) if coordinates
                      else _uniform_derivative(moved, spacing, edge_order))
        out.append(moveaxis(lax.convert_element_type(derivative, values.dtype), 0, ax))
    return out[0] if len(out) == 1 else out


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1):
    """The integral of sampled ``y`` along ``axis`` by the trapezoidal rule, at the
    coordinates ``x`` (1-D, or ``y``'s shape) or with a constant step ``dx``."""
    (values,) = promote_args_inexact(y)
    axis = canonicalize_axis(axis, values.ndim)
    values = moveaxis(values, axis, -1)
    if x is None:
        step = dx
    else:
        coordinates = ensure_array(x)
        if coordinates.ndim == 1:
            if coordinates.shape[0] != values.shape[-1]:
                raise EmberValueError(f"trapezoid: x of length {coordinates.shape[0]} for "
                                      f"{values.shape[-1]} samples along axis {axis}")
            step = diff(coordinates)
        else:
            step = diff(moveaxis(coordinates, axis, -1), axis=-1)
    average = multiply(add(values[..., 1:], values[..., :-1]), 0.5)
    return sum_(multiply(average, step), axis=-1)


def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * math.pi):
    """``p`` with jumps of more than ``max(discont, period / 2)`` between neighbours
    along ``axis`` replaced by their equivalents modulo ``period``."""
    (phases,) = promote_args_inexact(p)
    axis = canonicalize_axis(axis, phases.ndim)
    half = true_divide(period, 2)
    threshold = half if discont is None else maximum(discont, half)
    steps = diff(phases, axis=axis)
    wrapped = subtract(remainder(add(steps, half), period), half)
    # A step of exactly +period/2 stays positive (NumPy keeps its sign).
    wrapped = where(logical_and(equal(wrapped, negative(half)), greater(steps, 0)), half,
                    wrapped)
    correction = where(less(abs_(steps), threshold), 0.0, subtract(wrapped, steps))
    first = lax.slice_in_dim(phases, 0, 1, axis=axis)
    rest = lax.slice_in_dim(phases, 1, phases.shape[axis], axis=axis)
    return concatenate([first, add(rest, cumsum(correction, axis=axis))], axis=axis)
