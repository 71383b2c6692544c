"""Joining and splitting: concatenate, stack, split, tile, repeat, pad, append."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._manipulation import atleast_1d, atleast_2d, atleast_3d, expand_dims, ravel
from ember.numpy._promotion import concrete, ensure_array, is_array, result_dtype, sequence_arg

__all__ = [
    "concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack", "split",
    "array_split", "hsplit", "vsplit", "dsplit", "unstack", "tile", "repeat", "pad", "append",
    "block",
]


def _common(arrays: Sequence[Any], dtype: Any, name: str) -> list[Any]:
    """The arrays of a sequence, promoted to one dtype."""
    items = sequence_arg(arrays, name)
    if not items:
        raise EmberValueError(f"{name} needs at least one array")
    common = dtypes.canonicalize(dtype) if dtype is not None else result_dtype(*items)
    return [ensure_array(a, common) for a in items]


def concatenate(arrays: Sequence[Any], axis: int | None = 0, out: None = None,
                dtype: Any = None):
    """Join arrays along an existing axis (``axis=None`` joins them flattened)."""
    if out is not None:
        raise EmberValueError("concatenate(out=...) is not supported: Ember arrays are immutable")
    items = _common(arrays, dtype, "concatenate")
    if axis is None:
        items, axis = [ravel(x) for x in items], 0
    first = items[0]
    if first.ndim == 0:
        raise EmberValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = canonicalize_axis(axis, first.ndim)
    for x in items[1:]:
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape))
                                       if i != axis):
            raise EmberValueError(
                f"concatenate: shapes {[tuple(y.shape) for y in items]} differ outside axis "
                f"{axis}")
    return items[0] if len(items) == 1 else lax.concatenate(items, axis)


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0):
    return concatenate(arrays, axis)


def stack(arrays: Sequence[Any], axis: int = 0, out: None = None, dtype: Any = None):
    """Join arrays of one shape along a new axis."""
    items = _common(arrays, dtype, "stack")
    shapes = {tuple(x.shape) for x in items}
    if len(shapes) != 1:
        raise EmberValueError(f"stack: all arrays need the same shape, got "
                              f"{[tuple(x.shape) for x in items]}")
    axis = canonicalize_axis(axis, items[0].ndim + 1)
    return concatenate([expand_dims(x, axis) for x in items], axis, out)


def hstack(tup: Sequence[Any], dtype: Any = None):
    items = [atleast_1d(x) for x in _common(tup, dtype, "hstack")]
    return concatenate(items, 0 if items[0].ndim == 1 else 1)


def vstack(tup: Sequence[Any], dtype: Any = None):
    return concatenate([atleast_2d(x) for x in _common(tup, dtype, "vstack")], 0)


def dstack(tup: Sequence[Any], dtype: Any = None):
    return concatenate([atleast_3d(x) for x in _common(tup, dtype, "dstack")], 2)


def column_stack(tup: Sequence[Any]):
    """Stack 1-D arrays as columns (2-D arrays are joined as they are)."""
    items = [lax.reshape(x, (x.shape[0], 1)) if x.ndim == 1 else atleast_2d(x)
             for x in _common(tup, None, "column_stack")]
    return concatenate(items, 1)


def _split_points(size: int, sections: Any, equal: bool, axis: int) -> list[int]:
    if isinstance(sections, (list, tuple)) or np.ndim(sections) == 1:
        return [int(i) for i in np.asarray(concrete(sections, "split indices"))]
    count = operator.index(concrete(sections, "split sections").item())
    if count <= 0:
        raise EmberValueError(f"split: number of sections must be positive, got {count}")
    if equal and size % count:
        raise EmberValueError(f"split: axis {axis} of size {size} does not divide into {count} "
                              "equal sections (use array_split)")
    base, extra = divmod(size, count)
    sizes = [base + 1] * extra + [base] * (count - extra)
    return list(np.cumsum(sizes)[:-1])


def _split(ary: Any, indices_or_sections: Any, axis: int, equal: bool) -> list:
    x = ensure_array(ary)
    axis = canonicalize_axis(axis, x.ndim)
    size = x.shape[axis]
    points = _split_points(size, indices_or_sections, equal, axis)
    bounds = [0, *points, size]
    parts = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        start, stop = _clip_index(start, size), _clip_index(stop, size)
        parts.append(lax.slice_in_dim(x, start, max(start, stop), axis=axis))
    return parts


def _clip_index(index: int, size: int) -> int:
    """A split point as Python slicing reads it (negative from the end, clipped)."""
    if index < 0:
        index += size
    return min(max(index, 0), size)


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Split into equal sections, or at the given indices, along ``axis``."""
    return _split(ary, indices_or_sections, axis, equal=True)


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """As ``split``, but sections may differ in size by one (the first ones are larger)."""
    return _split(ary, indices_or_sections, axis, equal=False)


def hsplit(ary: Any, indices_or_sections: Any) -> list:
    x = ensure_array(ary)
    return split(x, indices_or_sections, 0 if x.ndim == 1 else 1)


def vsplit(ary: Any, indices_or_sections: Any) -> list:
    return split(ary, indices_or_sections, 0)


def dsplit(ary: Any, indices_or_sections: Any) -> list:
    return split(ary, indices_or_sections, 2)


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple of arrays of one rank less."""
    x = ensure_array(x)
    axis = canonicalize_axis(axis, x.ndim)
    return tuple(lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis]))


def tile(A: Any, reps: Any):
    """``A`` repeated ``reps`` times along each axis (one broadcast and one reshape)."""
    x = ensure_array(A)
    reps = tuple(operator.index(r) for r in (reps if isinstance(reps, (list, tuple)) else (reps,)))
    ndim = max(len(reps), x.ndim)
    reps = (1,) * (ndim - len(reps)) + reps
    shape = (1,) * (ndim - x.ndim) + x.shape
    interleaved = tuple(d for pair in zip(reps, shape) for d in pair)
    expanded = lax.broadcast_in_dim(lax.reshape(x, shape), interleaved,
                                    tuple(range(1, 2 * ndim, 2)))
    return lax.reshape(expanded, tuple(r * s for r, s in zip(reps, shape)))


def repeat(a: Any, repeats: Any, axis: int | None = None, *,
           total_repeat_length: int | None = None):
    """Repeat each element ``repeats`` times along ``axis`` (the flattened array if None).

    ``repeats`` is an int or a concrete array of counts; traced counts need
    ``total_repeat_length`` (the static size of the result along ``axis``).
    """
    x = ensure_array(a)
    if axis is None:
        x, axis = ravel(x), 0
    axis = canonicalize_axis(axis, x.ndim)
    n = x.shape[axis]
    if not is_array(repeats) and np.ndim(repeats) == 0:
        count = operator.index(repeats)
        if count < 0:
            raise EmberValueError(f"repeat: repeats must be non-negative, got {count}")
        shape = x.shape[:axis + 1] + (count,) + x.shape[axis + 1:]
        dims = tuple(i if i <= axis else i + 1 for i in range(x.ndim))
        expanded = lax.broadcast_in_dim(x, shape, dims)
        return lax.reshape(expanded, x.shape[:axis] + (n * count,) + x.shape[axis + 1:])
    return _repeat_by_counts(x, repeats, axis, total_repeat_length)


def _repeat_by_counts(x: Any, repeats: Any, axis: int, total: int | None) -> Any:
    from ember.numpy._cumulative import cumsum
    from ember.numpy._searching import searchsorted
    from ember.numpy.indexing import take

    n = x.shape[axis]
    if total is None:
        counts = concrete(repeats, "repeat(repeats=...) with array counts (or pass "
                                   "total_repeat_length)")
        counts = np.broadcast_to(counts, (n,))
        if (counts < 0).any():
            raise EmberValueError("repeat: repeats must be non-negative")
        return take(x, np.repeat(np.arange(n), counts), axis=axis)
    counts = lax.broadcast_in_dim(ensure_array(repeats, dtypes.default_int()), (n,),
                                  () if np.ndim(repeats) == 0 else (0,))
    positions = lax.iota(dtypes.default_int(), total)
    source = searchsorted(cumsum(counts), positions, side="right")
    return take(x, source, axis=axis, mode="clip")


_PAD_MODES = ("constant", "empty", "edge", "reflect", "symmetric", "wrap")


def _pad_widths(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    widths = np.asarray(concrete(pad_width, "pad(pad_width=...)"))
    if not np.issubdtype(widths.dtype, np.integer):
        raise EmberValueError(f"pad: pad_width must hold integers, got {pad_width!r}")
    try:
        widths = np.broadcast_to(widths, (ndim, 2))
    except ValueError:
        raise EmberValueError(f"pad: pad_width {pad_width!r} does not fit an array of "
                              f"{ndim} dimensions (need (before, after) per axis)") from None
    if (widths < 0).any():
        raise EmberValueError(f"pad: pad widths must be non-negative, got {pad_width!r}")
    return [(int(b), int(a)) for b, a in widths]


def _source_indices(mode: str, n: int, before: int, after: int) -> np.ndarray:
    """For each position of a padded axis, the index of the element it copies."""
    i = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return i % n
    period = 2 * n if mode == "symmetric" else 2 * (n - 1)
    if period == 0:
        return np.zeros_like(i)
    j = i % period
    mirror = period - 1 - j if mode == "symmetric" else period - j
    return np.where(j >= n, mirror, j)


def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any):
    """Pad each axis by ``(before, after)`` elements.

    Modes: 'constant' (``constant_values``, a scalar or per-axis pairs), 'empty' (zeros),
    'edge', 'reflect', 'symmetric' and 'wrap'.
    """
    from ember.numpy.indexing import take

    x = ensure_array(array)
    widths = _pad_widths(pad_width, x.ndim)
    if mode not in _PAD_MODES:
        raise EmberValueError(f"pad: mode {mode!r} is not supported; supported: {_PAD_MODES}")
    if mode in ("constant", "empty"):
        return _pad_constant(x, widths, kwargs.get("constant_values", 0))
    for axis, (before, after) in enumerate(widths):
        if before == after == 0:
            continue
        if x.shape[axis] == 0:
            raise EmberValueError(f"pad: cannot extend the empty axis {axis} with mode {mode!r}")
        x = take(x, _source_indices(mode, x.shape[axis], before, after), axis=axis)
    return x


def _pad_constant(x: Any, widths: list[tuple[int, int]], constant_values: Any) -> Any:
    values = np.broadcast_to(np.asarray(concrete(constant_values, "pad(constant_values=...)")),
                             (x.ndim, 2))
    if x.ndim == 0 or (values == values.flat[0]).all():
        fill = values.flat[0] if x.ndim else 0
        return lax.pad(x, np.asarray(fill, x.dtype), [(b, a, 0) for b, a in widths])
    for axis, side_values in enumerate(values):  # a different constant per axis or side
        for side, fill in enumerate(side_values):
            config = [(0, 0, 0)] * x.ndim
            config[axis] = (widths[axis][0], 0, 0) if side == 0 else (0, widths[axis][1], 0)
            x = lax.pad(x, np.asarray(fill, x.dtype), config)
    return x


def append(arr: Any, values: Any, axis: int | None = None):
    """``arr`` with ``values`` added at the end of ``axis`` (flattened if None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def _block_depth(arrays: Any, where: str = "arrays") -> int:
    """How deeply ``arrays`` nests lists; every branch must nest equally (as NumPy)."""
    if isinstance(arrays, tuple):
        raise EmberTypeError(f"block: {where} is a tuple; only lists nest blocks")
    if not isinstance(arrays, list):
        return 0
    if not arrays:
        raise EmberValueError(f"block: {where} is an empty list")
    depths = {_block_depth(item, f"{where}[{i}]") for i, item in enumerate(arrays)}
    if len(depths) != 1:
        raise EmberValueError(f"block: the lists in {where} nest to different depths "
                              f"{sorted(depths)}")
    return depths.pop() + 1


def block(arrays: Any):
    """An array assembled from nested lists of blocks: the innermost lists are joined
    along the last axis, the next ones along the one before, and so on (blocks get
    leading size-1 axes up to a common rank)."""
    depth = _block_depth(arrays)
    if depth == 0:
        return ensure_array(arrays)
    leaves = []

    def collect(item: Any) -> None:
        if isinstance(item, list):
            for sub in item:
                collect(sub)
        else:
            leaves.append(item)

    collect(arrays)
    ndim = max(depth, *(ensure_array(leaf).ndim for leaf in leaves))

    def build(item: Any, level: int) -> Any:
        if level == depth:
            x = ensure_array(item)
            return lax.reshape(x, (1,) * (ndim - x.ndim) + tuple(x.shape))
        return concatenate([build(sub, level + 1) for sub in item], axis=level - depth)

    return build(arrays, 0)
