"""Running reductions (cumsum, cumprod, cumulative_sum, ...) and ``diff``."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._joining import concatenate
from ember.numpy._manipulation import ravel
from ember.numpy._math import isnan, where
from ember.numpy._promotion import broadcast_to_shape, ensure_array, promote_args
from ember.numpy._reductions import _accumulation_dtype

__all__ = [
    "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "nancumsum", "nancumprod",
    "diff", "ediff1d",
]


def _running(scan: Callable, a: Any, axis: int | None, dtype: Any) -> Any:
    (x,) = promote_args(a)
    if axis is None:
        x, axis = ravel(x), 0
    axis = canonicalize_axis(axis, x.ndim)
    dtype = dtypes.canonicalize(dtype) if dtype is not None else _accumulation_dtype(x.dtype)
    return ensure_array(scan(lax.convert_element_type(x, dtype), axis))


def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: None = None):
    """Running sum along ``axis`` (of the flattened array if None)."""
    return _running(lax.cumsum, a, axis, dtype)


def cumprod(a: Any, axis: int | None = None, dtype: Any = None, out: None = None):
    """Running product along ``axis`` (of the flattened array if None)."""
    return _running(lax.cumprod, a, axis, dtype)


def _cumulative(scan: Callable, identity: int, x: Any, axis: int | None, dtype: Any,
                include_initial: bool) -> Any:
    """The Array API form: ``axis`` is required unless ``x`` is 1-D."""
    x = ensure_array(x)
    if axis is None:
        if x.ndim != 1:
            raise EmberValueError(f"cumulative functions need axis= for arrays of more than one "
                                  f"dimension (got shape {x.shape})")
        axis = 0
    out = _running(scan, x, axis, dtype)
    if not include_initial:
        return out
    axis = canonicalize_axis(axis, x.ndim)
    shape = tuple(1 if i == axis else d for i, d in enumerate(out.shape))
    initial = broadcast_to_shape(np.asarray(identity, out.dtype), shape)
    return concatenate([initial, out], axis)


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False):
    """Running sum (Array API); ``include_initial`` prepends a zero."""
    return _cumulative(lax.cumsum, 0, x, axis, dtype, include_initial)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False):
    """Running product (Array API); ``include_initial`` prepends a one."""
    return _cumulative(lax.cumprod, 1, x, axis, dtype, include_initial)


def _nan_as(a: Any, value: int) -> Any:
    (x,) = promote_args(a)
    return where(isnan(x), value, x) if dtypes.is_inexact(x.dtype) else x


def nancumsum(a: Any, axis: int | None = None, dtype: Any = None, out: None = None):
    return cumsum(_nan_as(a, 0), axis, dtype)


def nancumprod(a: Any, axis: int | None = None, dtype: Any = None, out: None = None):
    return cumprod(_nan_as(a, 1), axis, dtype)


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None):
    """``n``-th discrete difference along ``axis`` (bools give ``!=``, as NumPy)."""
    x = ensure_array(a)
    axis = canonicalize_axis(axis, x.ndim)
    if n < 0:
        raise EmberValueError(f"diff: order n must be non-negative, got {n}")
    parts = [x]
    for extra, at in ((prepend, 0), (append, 1)):
        if extra is not None:
            shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
            value = ensure_array(extra)
            value = broadcast_to_shape(value, shape) if value.ndim == 0 else value
            parts.insert(0 if at == 0 else len(parts), value)
    x = concatenate(parts, axis) if len(parts) > 1 else x
    for _ in range(n):
        size = x.shape[axis]
        upper = lax.slice_in_dim(x, min(1, size), size, axis=axis)
        lower = lax.slice_in_dim(x, 0, max(size - 1, 0), axis=axis)
        x = lax.ne(upper, lower) if dtypes.is_bool(x.dtype) else lax.sub(upper, lower)
    return x


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None):
    """Differences of consecutive elements of the flattened array."""
    out = diff(ravel(ary))
    parts = [ravel(ensure_array(v, out.dtype)) for v in (to_begin,) if v is not None]
    parts.append(out)
    parts += [ravel(ensure_array(v, out.dtype)) for v in (to_end,) if v is not None]
    return concatenate(parts) if len(parts) > 1 else out
