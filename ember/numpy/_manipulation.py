"""Shape manipulation: reshape, transpose and axis moves, expand / squeeze, broadcasting,
flips and rolls. Shapes are static: they must be known when a function is traced.
"""
from __future__ import annotations

import builtins
import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError, ShapeError
from ember.numpy._axes import canonicalize_axes, canonicalize_axis
from ember.numpy._promotion import (
    broadcast_shapes as _broadcast_shapes, broadcast_to_shape, concrete, ensure_array, is_array,
    is_concrete, sequence_arg,
)

__all__ = [
    "reshape", "ravel", "transpose", "permute_dims", "matrix_transpose", "swapaxes",
    "moveaxis", "expand_dims", "squeeze", "broadcast_to", "broadcast_arrays",
    "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "flip", "fliplr", "flipud",
    "rot90", "roll", "shape", "ndim", "size", "rollaxis",
]


def shape(a: Any) -> tuple[int, ...]:
    return ensure_array(a).shape


def ndim(a: Any) -> int:
    return ensure_array(a).ndim


def size(a: Any, axis: int | None = None) -> int:
    x = ensure_array(a)
    return x.size if axis is None else x.shape[canonicalize_axis(axis, x.ndim)]


def _resolve_shape(new_shape: Any, total: int, old_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``new_shape`` with its one ``-1`` (if any) inferred from the number of elements."""
    dims = tuple(operator.index(d) for d in (new_shape if isinstance(new_shape, (list, tuple))
                                             else (new_shape,)))
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise EmberValueError(f"reshape: can only infer one dimension, got shape {dims}")
    if builtins.any(d < -1 for d in dims):
        raise EmberValueError(f"reshape: negative dimension in shape {dims}")
    known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if unknown:
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape array of shape {old_shape} (size {total}) "
                             f"into shape {dims}: no size for -1 makes the sizes match")
        dims = tuple(total // known if d == -1 else d for d in dims)
    elif known != total:
        raise ShapeError(f"cannot reshape array of shape {old_shape} (size {total}) into "
                         f"shape {dims} (size {known})")
    return dims


def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None,
            copy: bool | None = None):
    """``a`` with a new shape (one dimension may be -1); ``order='F'`` reads column-major."""
    x = ensure_array(a)
    new = _resolve_shape(shape if shape is not None else newshape, x.size, x.shape)
    if order == "C":
        return lax.reshape(x, new)
    if order == "F":
        reversed_axes = tuple(range(x.ndim))[::-1]
        flat = lax.reshape(lax.transpose(x, reversed_axes), new[::-1])
        return lax.transpose(flat, tuple(range(len(new)))[::-1])
    raise EmberValueError(f"reshape: order must be 'C' or 'F', got {order!r}")


def ravel(a: Any, order: str = "C"):
    return reshape(a, (-1,), order)


def transpose(a: Any, axes: Sequence[int] | None = None):
    """Permute the axes (reverse them when ``axes`` is None)."""
    x = ensure_array(a)
    if axes is None:
        return lax.transpose(x, tuple(range(x.ndim))[::-1])
    perm = canonicalize_axes(tuple(axes), x.ndim)
    if len(perm) != x.ndim:
        raise EmberValueError(f"transpose: axes {tuple(axes)} do not match the {x.ndim} axes "
                              f"of shape {x.shape}")
    return lax.transpose(x, perm)


def permute_dims(a: Any, /, axes: Sequence[int]):
    return transpose(a, axes)


def matrix_transpose(x: Any, /):
    """Swap the last two axes (a stack of matrices, transposed)."""
    x = ensure_array(x)
    if x.ndim < 2:
        raise EmberValueError(f"matrix_transpose needs at least 2 dimensions, got shape {x.shape}")
    return swapaxes(x, -1, -2)


def swapaxes(a: Any, axis1: int, axis2: int):
    x = ensure_array(a)
    perm = list(range(x.ndim))
    i, j = canonicalize_axis(axis1, x.ndim), canonicalize_axis(axis2, x.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(x, perm)


def moveaxis(a: Any, source: int | Sequence[int], destination: int | Sequence[int]):
    """Move axes ``source`` to positions ``destination``; the others keep their order."""
    x = ensure_array(a)
    src = canonicalize_axes(source, x.ndim, "source")
    dst = canonicalize_axes(destination, x.ndim, "destination")
    if len(src) != len(dst):
        raise EmberValueError(f"moveaxis: source {source} and destination {destination} need "
                              "the same number of axes")
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(x, order)


def rollaxis(a: Any, axis: int, start: int = 0):
    """``axis`` moved to just before position ``start`` (NumPy's older ``moveaxis``)."""
    x = ensure_array(a)
    axis = canonicalize_axis(axis, x.ndim)
    start = operator.index(start)
    if not -x.ndim <= start <= x.ndim:
        raise EmberIndexError(f"rollaxis: start {start} is out of bounds for an array of "
                              f"{x.ndim} dimensions (valid: {-x.ndim} to {x.ndim})")
    start = start + x.ndim if start < 0 else start
    if axis < start:
        start -= 1
    return x if axis == start else moveaxis(x, axis, start)


def expand_dims(a: Any, axis: int | Sequence[int] = 0):
    """Insert size-1 axes at ``axis`` (positions in the result)."""
    x = ensure_array(a)
    axes = canonicalize_axes(axis, x.ndim + (len(axis) if isinstance(axis, (list, tuple))
                                             else 1))
    return lax.expand_dims(x, axes)


def squeeze(a: Any, axis: int | Sequence[int] | None = None):
    """Remove size-1 axes (all of them, or those in ``axis``, which must have size 1)."""
    x = ensure_array(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = canonicalize_axes(axis, x.ndim)
        for i in axes:
            if x.shape[i] != 1:
                raise EmberValueError(f"squeeze: axis {i} of shape {x.shape} has size "
                                      f"{x.shape[i]}, not 1")
    return lax.squeeze(x, axes)


def broadcast_to(array: Any, shape: Any):
    """``array`` broadcast to ``shape`` (NumPy's rules)."""
    x = ensure_array(array)
    target = tuple(operator.index(d) for d in (shape if isinstance(shape, (list, tuple))
                                               else (shape,)))
    if _broadcast_shapes(x.shape, target) != target:
        raise EmberValueError(f"cannot broadcast shape {x.shape} to shape {target}")
    return ensure_array(broadcast_to_shape(x, target))


def broadcast_shapes(*shapes: Sequence[int] | int) -> tuple[int, ...]:
    """The shape that arrays of ``shapes`` broadcast to (an integer is a 1-D shape)."""
    return _broadcast_shapes(*[_shape_arg(s) for s in shapes])


def _shape_arg(shape: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        return (shape,)
    dims = sequence_arg(shape, "broadcast_shapes", "shapes (tuples of integers)")
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
        raise EmberTypeError(f"broadcast_shapes takes shapes (tuples of integers), got {shape!r}")
    return tuple(int(d) for d in dims)


def broadcast_arrays(*args: Any) -> list:
    arrays = [ensure_array(a) for a in args]
    common = _broadcast_shapes(*[x.shape for x in arrays])
    return [broadcast_to(x, common) for x in arrays]


def _atleast(ndim: int, arrays: tuple, placement) -> Any:
    outs = []
    for a in arrays:
        x = ensure_array(a)
        outs.append(lax.reshape(x, placement(x.shape)) if x.ndim < ndim else x)
    return outs[0] if len(outs) == 1 else outs


def atleast_1d(*arys: Any):
    return _atleast(1, arys, lambda s: (1,) * (1 - len(s)) + s)


def atleast_2d(*arys: Any):
    return _atleast(2, arys, lambda s: (1,) * (2 - len(s)) + s)


def atleast_3d(*arys: Any):
    """Views with at least 3 dimensions: (n,) becomes (1, n, 1), (m, n) becomes (m, n, 1)."""
    return _atleast(3, arys, lambda s: {0: (1, 1, 1), 1: (1, *s, 1), 2: (*s, 1)}[len(s)])


def flip(m: Any, axis: int | Sequence[int] | None = None):
    """Reverse the order of elements along ``axis`` (all axes by default)."""
    x = ensure_array(m)
    return lax.rev(x, canonicalize_axes(axis, x.ndim))


def fliplr(m: Any):
    return flip(m, 1)


def flipud(m: Any):
    return flip(m, 0)


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``axes`` (first toward second)."""
    x = ensure_array(m)
    a, b = canonicalize_axes(axes, x.ndim)
    k = k % 4
    if k == 0:
        return x
    if k == 2:
        return flip(x, (a, b))
    if k == 1:
        return swapaxes(flip(x, b), a, b)
    return flip(swapaxes(x, a, b), b)


def roll(a: Any, shift: Any, axis: int | Sequence[int] | None = None):
    """Shift elements along ``axis`` cyclically (the flattened array if ``axis`` is None).

    Static shifts become two slices; a traced shift reads a window of the doubled axis.
    """
    x = ensure_array(a)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), x.shape)
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    shifts = shift if isinstance(shift, (list, tuple)) or (
        not is_array(shift) and np.ndim(shift)) else (shift,) * len(axes)
    if len(shifts) != len(axes):
        raise EmberValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    for s, ax in zip(shifts, axes):
        x = _roll_axis(x, s, canonicalize_axis(ax, x.ndim))
    return x


def _roll_axis(x: Any, shift: Any, axis: int) -> Any:
    n = x.shape[axis]
    if n == 0:
        return x
    if is_array(shift) and not is_concrete(shift):
        doubled = lax.concatenate([x, x], axis)
        start = lax.rem(lax.sub(n, lax.rem(shift, n)), n)
        return lax.dynamic_slice_in_dim(doubled, start, n, axis)
    s = int(concrete(shift, "roll(shift=...)")) % n
    if s == 0:
        return x
    head = lax.slice_in_dim(x, n - s, n, axis=axis)
    tail = lax.slice_in_dim(x, 0, n - s, axis=axis)
    return lax.concatenate([head, tail], axis)
