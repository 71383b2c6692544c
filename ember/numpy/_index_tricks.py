"""Building indices and index arrays: indices, ix_, unravel_index, ravel_multi_index,
diag_indices(_from), tril/triu_indices(_from), mask_indices, and the index objects
mgrid, ogrid, r_, c_, s_, index_exp.

Shapes here are static: the ``*_indices`` functions compute their (constant) answers
with NumPy; ``unravel_index`` / ``ravel_multi_index`` work on traced indices (out of
range ones are clipped as JAX, or per ``mode``).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError, user_errors
from ember.numpy._creation import arange, asarray, linspace
from ember.numpy._joining import concatenate
from ember.numpy._manipulation import reshape
from ember.numpy._promotion import (
    concrete, constant_like, ensure_array, promote_args, result_dtype,
)

__all__ = ["indices", "ix_", "unravel_index", "ravel_multi_index", "diag_indices",
           "diag_indices_from", "tril_indices", "triu_indices", "tril_indices_from",
           "triu_indices_from", "mask_indices", "mgrid", "ogrid", "r_", "c_", "s_",
           "index_exp"]

s_ = np.s_
index_exp = np.index_exp


def _dims(shape: Any, name: str) -> tuple[int, ...]:
    try:
        return tuple(operator.index(d) for d in (shape if isinstance(shape, (list, tuple))
                                                 else (shape,)))
    except TypeError:
        raise EmberTypeError(f"{name}: dimensions must be integers, got {shape!r}") from None


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False):
    """The coordinate arrays of a grid of shape ``dimensions``: one ``(N, *dimensions)``
    array, or with ``sparse`` N arrays that broadcast to it."""
    shape = _dims(dimensions, "indices")
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_int()
    if sparse:
        return tuple(lax.broadcasted_iota(dtype, tuple(d if j == i else 1
                                                       for j, d in enumerate(shape)), i)
                     for i in range(len(shape)))
    grid = (len(shape), *shape)
    return lax.broadcasted_iota(dtype, grid, 0) if not shape else concatenate(
        [lax.broadcasted_iota(dtype, (1, *shape), i + 1) for i in range(len(shape))])


def ix_(*args: Any) -> tuple:
    """Open-mesh index arrays from N 1-D sequences: the k-th has shape ``(1,..., n_k,
    ..., 1)``, so together they index the cross product (boolean ones select their True
    positions; those must be concrete)."""
    out = []
    for k, a in enumerate(args):
        x = ensure_array(a)
        if x.ndim != 1:
            raise EmberValueError(f"ix_: arguments must be 1-D, argument {k} has shape "
                                  f"{tuple(x.shape)}")
        if dtypes.is_bool(x.dtype):
            x = asarray(np.flatnonzero(concrete(x, "ix_ of a boolean array")))
        elif not dtypes.is_integer(x.dtype) and x.shape[0]:
            raise EmberTypeError(f"ix_: arguments must be integers or booleans, got {x.dtype}")
        out.append(reshape(x, tuple(-1 if j == k else 1 for j in range(len(args)))))
    return tuple(out)


def _strides(shape: tuple[int, ...], order: str) -> list[int]:
    if order not in ("C", "F"):
        raise EmberValueError(f"order must be 'C' or 'F', got {order!r}")
    axes = range(len(shape)) if order == "F" else reversed(range(len(shape)))
    strides, step = [0] * len(shape), 1
    for axis in axes:
        strides[axis], step = step, step * shape[axis]
    return strides


def unravel_index(indices: Any, shape: Sequence[int]) -> tuple:
    """The coordinates in an array of ``shape`` of flat indices (negative ones count
    from the end; out of range ones are clipped, as JAX)."""
    dims = _dims(shape, "unravel_index")
    flat = ensure_array(indices)
    if not dtypes.is_integer(flat.dtype):
        raise EmberTypeError(f"unravel_index needs integer indices, got {flat.dtype}")
    size = math.prod(dims)
    (flat,) = promote_args(flat, dtype=dtypes.default_int())
    flat = lax.select_n(lax.lt(flat, _full(flat, 0)), flat, lax.add(flat, _full(flat, size)))
    flat = lax.clamp(0, flat, max(size - 1, 0))
    return tuple(lax.rem(lax.div(flat, _full(flat, stride)), _full(flat, max(d, 1)))
                 for stride, d in zip(_strides(dims, "C"), dims))


def _full(like: Any, value: int) -> Any:
    return constant_like(value, like)


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C"):
    """Flat indices from a tuple of coordinate arrays; ``mode`` 'raise' (concrete
    coordinates only), 'wrap' or 'clip' handles out of range ones."""
    shape = _dims(dims, "ravel_multi_index")
    if not isinstance(multi_index, (list, tuple)) and not hasattr(multi_index, "shape"):
        raise EmberTypeError(f"ravel_multi_index takes a tuple of coordinate arrays, got "
                             f"{type(multi_index).__name__}")
    coordinates = [ensure_array(c) for c in multi_index]
    if len(coordinates) != len(shape):
        raise EmberValueError(f"ravel_multi_index: {len(coordinates)} coordinate arrays for "
                              f"{len(shape)} dimensions {shape}")
    if mode not in ("raise", "wrap", "clip"):
        raise EmberValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', got "
                              f"{mode!r}")
    for c in coordinates:
        if not dtypes.is_integer(c.dtype):
            raise EmberTypeError(f"ravel_multi_index needs integer coordinates, got {c.dtype}")
    coordinates = promote_args(*coordinates, dtype=dtypes.default_int())
    flat = None
    for c, d, stride in zip(coordinates, shape, _strides(shape, order)):
        if mode == "raise":
            values = concrete(c, "ravel_multi_index(mode='raise')")
            if values.size and (values.min() < 0 or values.max() >= d):
                raise EmberIndexError(f"ravel_multi_index: coordinate out of range for "
                                      f"dimension of size {d}")
        elif mode == "clip":
            c = lax.clamp(0, c, d - 1)
        else:
            c = _wrap(c, d)
        term = lax.mul(c, _full(c, stride))
        flat = term if flat is None else lax.add(flat, term)
    return flat


def _wrap(c: Any, d: int) -> Any:
    rem = lax.rem(c, _full(c, d))
    return lax.select_n(lax.lt(rem, _full(rem, 0)), rem, lax.add(rem, _full(rem, d)))


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """Indices of the main diagonal of an ``(n,) * ndim`` array."""
    index = arange(operator.index(n))
    return (index,) * operator.index(ndim)


def diag_indices_from(arr: Any) -> tuple:
    """``diag_indices`` of a square (equal-sided, at least 2-d) array."""
    x = ensure_array(arr)
    if x.ndim < 2 or len(set(x.shape)) != 1:
        raise EmberValueError(f"diag_indices_from needs an array of at least 2 equal "
                              f"dimensions, got shape {tuple(x.shape)}")
    return diag_indices(x.shape[0], x.ndim)


def _static_indices(numpy_fn: Callable, *args: Any) -> tuple:
    return tuple(asarray(i.astype(dtypes.default_int())) for i in numpy_fn(*args))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the lower triangle (below diagonal ``k``) of an
    ``(n, m)`` array."""
    return _static_indices(np.tril_indices, operator.index(n), operator.index(k), m)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the upper triangle (above diagonal ``k``)."""
    return _static_indices(np.triu_indices, operator.index(n), operator.index(k), m)


def _square(name: str, arr: Any) -> tuple[int, int]:
    shape = tuple(ensure_array(arr).shape)
    if len(shape) != 2:
        raise EmberValueError(f"{name} needs a 2-D array, got shape {shape}")
    return shape


def tril_indices_from(arr: Any, k: int = 0) -> tuple:
    n, m = _square("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple:
    n, m = _square("triu_indices_from", arr)
    return triu_indices(n, k, m)


def mask_indices(n: int, mask_func: Callable, k: int = 0, *, size: int | None = None) -> tuple:
    """Indices where ``mask_func(ones((n, n)), k)`` is nonzero (e.g. ``triu``)."""
    from ember.numpy._creation import ones
    from ember.numpy._searching import nonzero

    return nonzero(mask_func(ones((n, n), dtypes.int32), k), size=size)


class _Grid:
    """``mgrid`` / ``ogrid``: dense or open coordinate grids from slices (a complex step
    ``5j`` means 5 points, ends included); the slices must be concrete."""

    def __init__(self, sparse: bool):
        self.sparse = sparse

    @user_errors
    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        slices = key if isinstance(key, tuple) else (key,)
        axes = [_slice_values(s) for s in slices]
        if not isinstance(key, tuple):
            return axes[0]
        dtype = result_dtype(*axes)
        axes = [ensure_array(a, dtype) for a in axes]
        shape = tuple(a.shape[0] for a in axes)
        if self.sparse:
            return [lax.broadcast_in_dim(a, tuple(d if j == i else 1 for j, d in enumerate(shape)),
                                         (i,)) for i, a in enumerate(axes)]
        grid = [lax.broadcast_in_dim(a, (1, *shape), (i + 1,)) for i, a in enumerate(axes)]
        return concatenate(grid) if grid else ensure_array(np.zeros((0,), dtype))


def _slice_values(s: slice) -> Any:
    if not isinstance(s, slice):
        raise EmberTypeError(f"mgrid / ogrid / r_ take slices such as 0:5 or 0:1:5j, got "
                             f"{s!r}")
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return linspace(start, s.stop, int(abs(step)))
    return arange(start, s.stop, step)


class _Concatenator:
    """``r_`` / ``c_``: concatenation by index syntax. Items are arrays, scalars or slices
    (``a:b:step``, or ``a:b:nj`` for n points); a leading string ``'axis[,ndmin[,
    trans1d]]'`` or ``'r'`` / ``'c'`` (a row or column matrix) sets how, as NumPy."""

    def __init__(self, axis: int, ndmin: int, trans1d: int):
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    @user_errors
    def __getitem__(self, key: Any) -> Any:
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, None
        if items and isinstance(items[0], str):
            directive = items.pop(0)
            if directive in ("r", "c"):
                matrix = directive
            else:
                axis, ndmin, trans1d = _directive(directive, ndmin, trans1d)
        values = [_slice_values(i) if isinstance(i, slice) else i for i in items]
        if not values:
            return ensure_array(np.zeros((0,), dtypes.default_float()))
        dtype = result_dtype(*values)
        arrays = [_with_ndmin(ensure_array(v, dtype), ndmin, trans1d) for v in values]
        out = concatenate(arrays, axis=axis)
        if matrix == "r":
            return reshape(out, (1, -1))
        if matrix == "c":
            return reshape(out, (-1, 1))
        return out


def _directive(text: str, ndmin: int, trans1d: int) -> tuple[int, int, int]:
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        raise EmberValueError(f"r_ / c_: a directive is 'axis[,ndmin[,trans1d]]', 'r' or 'c', "
                              f"got {text!r}") from None
    if not 1 <= len(parts) <= 3:
        raise EmberValueError(f"r_ / c_: a directive has 1 to 3 numbers, got {text!r}")
    parts += [ndmin, trans1d][len(parts) - 1:]
    return parts[0], parts[1], parts[2]


def _with_ndmin(x: Any, ndmin: int, trans1d: int) -> Any:
    """At least ``ndmin`` dimensions, adding size-1 axes around the original ones so that
    those start at axis ``trans1d`` (counted from the end of the added ones if negative:
    -1 puts all of them first)."""
    missing = ndmin - x.ndim
    if missing <= 0:
        return x
    before = min(max(trans1d if trans1d >= 0 else trans1d + missing + 1, 0), missing)
    return reshape(x, (*([1] * before), *x.shape, *([1] * (missing - before))))


mgrid = _Grid(sparse=False)
ogrid = _Grid(sparse=True)
r_ = _Concatenator(axis=0, ndmin=1, trans1d=-1)
c_ = _Concatenator(axis=-1, ndmin=2, trans1d=0)
