"""Axis arguments: normalizing ``axis=`` values and the errors for bad ones."""
from __future__ import annotations

from typing import Any, Sequence

from ember.errors import EmberIndexError, EmberTypeError, EmberValueError


def canonicalize_axis(axis: Any, ndim: int, name: str = "axis") -> int:
    """A non-negative axis in ``range(ndim)``; negative axes count from the end."""
    if isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise EmberTypeError(f"{name} must be an integer, got {axis!r}")
    axis = axis.__index__()
    if not -ndim <= axis < ndim:
        raise EmberIndexError(
            f"{name} {axis} is out of bounds for an array of {ndim} dimension"
            f"{'' if ndim == 1 else 's'} (valid: {-ndim} to {ndim - 1})" if ndim else
            f"{name} {axis} is out of bounds for a 0-d array (it has no axes)")
    return axis % ndim


def canonicalize_axes(axis: int | Sequence[int] | None, ndim: int,
                      name: str = "axis") -> tuple[int, ...]:
    """Normalized, duplicate-free axes; ``None`` means every axis."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = tuple(canonicalize_axis(a, ndim, name) for a in axis)
    else:
        axes = (canonicalize_axis(axis, ndim, name),)
    if len(set(axes)) != len(axes):
        raise EmberValueError(f"repeated {name} in {axis!r}")
    return axes
