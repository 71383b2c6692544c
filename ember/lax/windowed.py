"""Reductions whose combining function the user passes: ``reduce`` and ``reduce_window``
(as ``jax.lax``), and ``reduce_window_shape_tuple``.

Neither is a primitive of its own; both are built on primitives whose rules exist, so
jit, grad and vmap follow. ``reduce`` with ``add`` / ``mul`` / ``max`` / ``min`` (or a
bitwise and / or / xor) and that computation's identity binds the matching reduction
primitive; any other computation is folded pairwise, halving the axis each round
(O(log n) applications, as a tree reduction in XLA).

``reduce_window`` pads with the init value (spreading the operand first for base
dilation), then, one window axis at a time, combines one strided slice per window
offset: sum(window) slices rather than prod(window), and they fuse into one loop. Max
pooling's gradient goes to each window's first maximum (row-major), as in JAX, by a
custom JVP that compares one slice per window offset with the result.
As in XLA, the computation must be associative and commutative. The init value is
applied once to each window unless it is the computation's identity; padding holds the
identity where the computation is a known monoid, and the init value otherwise.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import aval_of
from ember.core.pytree import tree_flatten, tree_unflatten
from ember.core.trace import Tracer
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import elementwise as ew
from ember.ops.linalg import padding_pairs
from ember.ops.reductions import (
    MONOIDS, normalize_axis, reduce_and, reduce_max, reduce_min, reduce_or, reduce_prod,
    reduce_sum, reduce_xor)
from ember.ops.structural import broadcast_in_dim, pad, slice_in_dim, squeeze

__all__ = ["reduce", "reduce_window", "reduce_window_shape_tuple"]

# lax computation -> (monoid name in MONOIDS, the reduction that applies it)
_MONOID_REDUCERS: dict[Callable, tuple[str, Callable]] = {
    ew.add: ("reduce_sum", reduce_sum),
    ew.mul: ("reduce_prod", reduce_prod),
    ew.max: ("reduce_max", reduce_max),
    ew.min: ("reduce_min", reduce_min),
    ew.bitwise_and: ("reduce_and", reduce_and),
    ew.bitwise_or: ("reduce_or", reduce_or),
    ew.bitwise_xor: ("reduce_xor", reduce_xor),
}


def _unwrapped(fn: Callable) -> Callable:
    """The function under the user-error wrapper that ``ember.lax`` puts on its names."""
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def _monoid_of(computation: Callable, init_values: Sequence[Any]) -> tuple[str, Callable] | None:
    """The monoid reduction ``computation`` is, when every init value is its identity."""
    monoid = _MONOID_REDUCERS.get(_unwrapped(computation))
    if monoid is None or not all(_is_identity(monoid[0], v) for v in init_values):
        return None
    return monoid


def _is_identity(monoid_name: str, value: Any) -> bool:
    if isinstance(value, Tracer):
        return False  # not known while tracing: apply it, which is always right
    value = np.asarray(value)
    identity = MONOIDS[monoid_name].identity(value.dtype)
    return value.shape == () and bool(value == np.asarray(identity, value.dtype))


def _init_scalars(init_values: Any, operands: Sequence[Any], tree: Any, name: str) -> list:
    """The init values as 0-d values of their operands' dtypes (Python scalars take it)."""
    leaves, init_tree = tree_flatten(init_values)
    if init_tree != tree:
        raise EmberValueError(f"{name}: init_values must have the structure of the operands; "
                              f"got {init_tree} for operands {tree}")
    scalars = []
    for init, operand in zip(leaves, operands):
        dtype, init_aval = aval_of(operand).dtype, aval_of(init)
        if init_aval.shape != ():
            raise EmberValueError(f"{name}: init values must be scalars, got shape "
                                  f"{init_aval.shape}")
        if dtypes.is_weak_scalar(init):
            init = _scalar_as(init, dtype)
        elif init_aval.dtype != dtype:
            raise EmberTypeError(f"{name}: init value dtype {init_aval.dtype} differs from the "
                                 f"operand's {dtype}; pass it as {dtype} (e.g. with .astype)")
        scalars.append(init)
    return scalars


def _scalar_as(value: Any, dtype: np.dtype) -> np.ndarray:
    """A Python scalar as ``dtype``; an infinity saturates to an integer dtype's bound
    (max pooling of integers with ``-inf``), as XLA's conversion does."""
    if dtypes.is_integer(dtype) and isinstance(value, float) and np.isinf(value):
        info = np.iinfo(dtype)
        return np.asarray(info.min if value < 0 else info.max, dtype)
    return np.asarray(value, dtype)


def _combiner(computation: Callable, tree: Any) -> Callable[[list, list], list]:
    """``computation`` on flat lists of leaves, checked to keep the operands' structure."""
    def combine(a: list, b: list) -> list:
        out, out_tree = tree_flatten(computation(tree_unflatten(tree, a),
                                                 tree_unflatten(tree, b)))
        if out_tree != tree:
            raise EmberValueError(f"the reduction computation must return the structure of "
                                  f"its operands ({tree}); it returned {out_tree}")
        return out
    return combine


def _apply_init(combine: Callable, values: list, inits: list, known_identity: bool) -> list:
    if known_identity:
        return values
    shape = np.shape(values[0])
    return combine([broadcast_in_dim(i, shape, ()) for i in inits], values)


# --- reduce -------------------------------------------------------------------------------

def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any],
           dimensions: Sequence[int]) -> Any:
    """Reduce ``operands`` (an array or a pytree of arrays of one shape) over
    ``dimensions`` with ``computation`` (as ``jax.lax.reduce``). ``init_values`` has the
    operands' structure and must be the computation's identity, as in JAX."""
    flat, tree = tree_flatten(operands)
    if not flat:
        raise EmberValueError("reduce needs at least one operand")
    shape = tuple(np.shape(flat[0]))
    if any(tuple(np.shape(x)) != shape for x in flat):
        raise EmberValueError(f"reduce: operands must share one shape, got "
                              f"{[tuple(np.shape(x)) for x in flat]}")
    inits = _init_scalars(init_values, flat, tree, "reduce")
    axes = sorted({normalize_axis("reduce", d, len(shape)) for d in dimensions})
    monoid = _monoid_of(computation, inits)
    if monoid is not None:
        return tree_unflatten(tree, [monoid[1](x, tuple(axes)) for x in flat])
    combine = _combiner(computation, tree)
    for axis in reversed(axes):  # from the last, so earlier axis numbers stay valid
        flat = _fold_axis(combine, flat, inits, axis)
    return tree_unflatten(tree, _apply_init(combine, flat, inits, known_identity=False))


def _fold_axis(combine: Callable, flat: list, inits: list, axis: int) -> list:
    """Combine ``flat`` over ``axis`` pairwise (the axis is removed)."""
    ndim = len(np.shape(flat[0]))
    grow = [(0, int(d == axis), 0) for d in range(ndim)]  # one more element on ``axis``
    size = np.shape(flat[0])[axis]
    if size == 0:  # an empty axis reduces to the identity
        flat, size = [pad(x, i, grow) for x, i in zip(flat, inits)], 1
    while size > 1:
        if size % 2:  # pad with the identity to an even length
            flat, size = [pad(x, i, grow) for x, i in zip(flat, inits)], size + 1
        flat = combine([slice_in_dim(x, 0, size, 2, axis) for x in flat],
                       [slice_in_dim(x, 1, size, 2, axis) for x in flat])
        size //= 2
    return [squeeze(x, (axis,)) for x in flat]


# --- reduce_window ------------------------------------------------------------------------

def _window_ints(name: str, value: Sequence[int] | None, ndim: int, default: int) -> tuple:
    if value is None:
        return (default,) * ndim
    value = tuple(int(v) for v in value)
    if len(value) != ndim:
        raise EmberValueError(f"reduce_window: {name}={value} needs one entry per operand "
                              f"axis ({ndim} axes)")
    if any(v < 1 for v in value):
        raise EmberValueError(f"reduce_window: {name}={value} entries must be >= 1")
    return value


def _dilated(size: int, dilation: int) -> int:
    return 0 if size == 0 else (size - 1) * dilation + 1


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[Sequence[int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of ``reduce_window`` with explicit (low, high) ``padding``."""
    ndim = len(operand_shape)
    base = _window_ints("base_dilation", base_dilation, ndim, 1)
    dilation = _window_ints("window_dilation", window_dilation, ndim, 1)
    out = []
    for size, window, stride, (lo, hi), b, d in zip(
            operand_shape, window_dimensions, window_strides, padding, base, dilation):
        padded = _dilated(size, b) + lo + hi
        span = _dilated(window, d)
        out.append(0 if padded < span else (padded - span) // stride + 1)
    return tuple(out)


def reduce_window(operand: Any, init_value: Any, computation: Callable[[Any, Any], Any],
                  window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
                  padding: str | Sequence[tuple[int, int]] = "VALID",
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """Reduce every window of ``operand`` (an array or a pytree of arrays of one shape)
    with ``computation``, as ``jax.lax.reduce_window``: max pooling is
    ``reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID')``.

    ``padding`` is 'VALID', 'SAME', 'SAME_LOWER' or one (low, high) pair per axis; padded
    positions hold ``init_value``.
    """
    flat, tree = tree_flatten(operand)
    if not flat:
        raise EmberValueError("reduce_window needs at least one operand")
    shape = tuple(np.shape(flat[0]))
    if any(tuple(np.shape(x)) != shape for x in flat):
        raise EmberValueError(f"reduce_window: operands must share one shape, got "
                              f"{[tuple(np.shape(x)) for x in flat]}")
    ndim = len(shape)
    windows = _window_ints("window_dimensions", window_dimensions, ndim, 1)
    strides = _window_ints("window_strides", window_strides, ndim, 1)
    base = _window_ints("base_dilation", base_dilation, ndim, 1)
    dilation = _window_ints("window_dilation", window_dilation, ndim, 1)
    # A padding string sizes against the undilated operand, as in JAX.
    spans = [_dilated(w, d) for w, d in zip(windows, dilation)]
    padding = padding_pairs(padding, shape, spans, strides)
    out_shape = reduce_window_shape_tuple(shape, windows, strides, padding, base, dilation)

    inits = _init_scalars(init_value, flat, tree, "reduce_window")
    # Padding holds the identity where it is known, so that a non-identity init value
    # counts once per window, as in XLA.
    monoid = _MONOID_REDUCERS.get(_unwrapped(computation))
    fills = inits if monoid is None else [
        np.asarray(MONOIDS[monoid[0]].identity(aval_of(x).dtype), aval_of(x).dtype)
        for x in flat]
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base)]
    if any(c != (0, 0, 0) for c in config):
        flat = [pad(x, fill, config) for x, fill in zip(flat, fills)]
    combine = _combiner(computation, tree)
    window = (windows, strides, dilation, out_shape)
    if (monoid is not None and monoid[0] in _EXTREMA and len(flat) == 1
            and dtypes.is_inexact(aval_of(flat[0]).dtype)):
        flat = [_first_extremum(flat[0], combine, window)]
    else:
        flat = _fold_windows(combine, flat, window)
    known_identity = _monoid_of(computation, inits) is not None
    return tree_unflatten(tree, _apply_init(combine, flat, inits, known_identity))


_EXTREMA = ("reduce_max", "reduce_min")
Window = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _fold_windows(combine: Callable, flat: list, window: Window) -> list:
    windows, strides, dilation, out_shape = window
    for axis in range(len(windows)):
        flat = _window_axis(combine, flat, axis, windows[axis], strides[axis],
                            dilation[axis], out_shape[axis])
    return flat


def _window_pieces(x: Any, window: Window) -> list:
    """One strided slice of ``x`` per window offset, in row-major window order."""
    from ember.ops.structural import slice as slice_

    windows, strides, dilation, out_shape = window
    pieces = []
    for offset in itertools.product(*(range(w) for w in windows)):
        starts = [k * d if n else 0 for k, d, n in zip(offset, dilation, out_shape)]
        limits = [s + (n - 1) * st + 1 if n else 0
                  for s, n, st in zip(starts, out_shape, strides)]
        pieces.append(slice_(x, starts, limits, strides))
    return pieces


def _first_extremum(x: Any, combine: Callable, window: Window) -> Any:
    """The max (or min) of each window, whose derivative is that of the window's first
    extreme entry in row-major order, as JAX's (select_and_scatter) gradient: with ties
    (ReLU zeros, saturated pixels) the whole cotangent goes to one entry."""
    from ember.transforms.custom import custom_jvp

    @custom_jvp
    def extremum(v: Any) -> Any:
        return _fold_windows(combine, [v], window)[0]

    @extremum.defjvp
    def _extremum_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        (v,), (t,) = primals, tangents
        out = extremum(v)
        out_is_nan = ew.ne(out, out)
        tangent = broadcast_in_dim(np.zeros((), t.dtype), np.shape(out), ())
        taken = broadcast_in_dim(np.array(False), np.shape(out), ())
        for value, value_t in zip(_window_pieces(v, window), _window_pieces(t, window)):
            is_extreme = ew.bitwise_or(ew.eq(value, out),
                                       ew.bitwise_and(out_is_nan, ew.ne(value, value)))
            hit = ew.bitwise_and(is_extreme, ew.bitwise_not(taken))
            tangent = ew.select_n(hit, tangent, value_t)
            taken = ew.bitwise_or(taken, hit)
        return out, tangent

    return extremum(x)


def _window_axis(combine: Callable, flat: list, axis: int, window: int, stride: int,
                 dilation: int, out_size: int) -> list:
    """Combine the ``window`` strided slices that make each output along ``axis``."""
    if window == 1 and stride == 1 and np.shape(flat[0])[axis] == out_size:
        return flat
    result = None
    for k in range(window):
        start = k * dilation if out_size else 0
        limit = start + (out_size - 1) * stride + 1 if out_size else 0
        piece = [slice_in_dim(x, start, limit, stride, axis) for x in flat]
        result = piece if result is None else combine(result, piece)
    return result
