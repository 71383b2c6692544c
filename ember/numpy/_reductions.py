"""Reductions: sum, prod, max, min, mean, var, std, all, any, count_nonzero, ptp, average
and the NaN-ignoring variants.

Dtypes follow the Array API: sums and products of bools and integers narrower than the
default integer accumulate in the default integer (int32, or int64 with x64), unsigned
ones in the default unsigned; means, variances and deviations of integers are floats.
``max`` / ``min`` of an empty selection need ``initial=`` (as NumPy).
"""
from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axes
from ember.numpy._creation import full
from ember.numpy._math import isnan, true_divide, where
from ember.numpy._ufuncs import maximum, subtract
from ember.numpy._promotion import (
    broadcast_to_shape, ensure_array, inexact_dtype, promote_args, promote_args_inexact,
)

__all__ = [
    "sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "all", "any",
    "count_nonzero", "ptp", "average", "nansum", "nanprod", "nanmax", "nanmin", "nanmean",
    "nanvar", "nanstd",
]

Axis = int | Sequence[int] | None


def _keep(out: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> Any:
    if not keepdims:
        return out
    return lax.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _reduce(reducer: Callable, x: Any, axis: Axis, keepdims: bool) -> Any:
    axes = canonicalize_axes(axis, x.ndim)
    return ensure_array(_keep(reducer(x, axes), x.shape, axes, keepdims))


def _accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """Sum / prod result dtype for ``dtype=None`` (see module docstring)."""
    if dtypes.is_bool(dtype):
        return dtypes.default_int()
    if dtypes.is_signed(dtype) and dtype.itemsize < dtypes.default_int().itemsize:
        return dtypes.default_int()
    default_uint = dtypes.canonicalize(dtypes.uint64)
    if dtypes.is_unsigned(dtype) and dtype.itemsize < default_uint.itemsize:
        return default_uint
    return dtype


def _masked(x: Any, where_: Any, identity: Any) -> Any:
    if where_ is None:
        return x
    return where(where_, x, full((), identity, x.dtype))


def _monoid(reducer: Callable, identity: int, a: Any, axis: Axis, dtype: Any, keepdims: bool,
            initial: Any, where_: Any, promote_integers: bool = True) -> Any:
    (x,) = promote_args(a)
    if dtype is not None:
        dtype = dtypes.canonicalize(dtype)
    elif promote_integers or not dtypes.is_integer(x.dtype):
        dtype = _accumulation_dtype(x.dtype)
    else:  # JAX's promote_integers=False: integers keep their width
        dtype = x.dtype
    x = lax.convert_element_type(_masked(x, where_, identity), dtype)
    out = _reduce(reducer, x, axis, keepdims)
    if initial is not None:
        combine = lax.add if reducer is lax.reduce_sum else lax.mul
        out = combine(*promote_args(out, initial, dtype=dtype))
    return out


def sum(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, keepdims: bool = False,
        initial: Any = None, where: Any = None, promote_integers: bool = True):
    """Sum over ``axis`` (all axes by default); narrow integers accumulate in the default
    integer unless ``promote_integers=False``."""
    _no_out(out, "sum")
    return _monoid(lax.reduce_sum, 0, a, axis, dtype, keepdims, initial, where,
                   promote_integers)


def prod(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None, promote_integers: bool = True):
    """Product over ``axis`` (all axes by default); integers as ``sum``."""
    _no_out(out, "prod")
    return _monoid(lax.reduce_prod, 1, a, axis, dtype, keepdims, initial, where,
                   promote_integers)


def _no_out(out: Any, name: str) -> None:
    if out is not None:
        raise EmberValueError(f"{name}(out=...) is not supported: Ember arrays are immutable; "
                              "use the return value")


def _extremum(name: str, reducer: Callable, combine: Callable, a: Any, axis: Axis,
              keepdims: bool, initial: Any, where_: Any) -> Any:
    (x,) = promote_args(a)
    axes = canonicalize_axes(axis, x.ndim)
    if initial is None and (where_ is not None or builtins.any(x.shape[i] == 0 for i in axes)):
        raise EmberValueError(
            f"{name} of an empty selection has no identity: axis {axis} of shape {x.shape}"
            f"{' with where=' if where_ is not None else ''}; pass initial=")
    if where_ is not None:
        x = where(where_, x, full((), initial, x.dtype))
    out = _reduce(reducer, x, axis, keepdims)
    if initial is not None:
        out = combine(*promote_args(out, initial, dtype=x.dtype))
    return out


def max(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None):
    """Largest value over ``axis``; NaN propagates."""
    _no_out(out, "max")
    return _extremum("max", lax.reduce_max, lax.max, a, axis, keepdims, initial, where)


def min(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None):
    """Smallest value over ``axis``; NaN propagates."""
    _no_out(out, "min")
    return _extremum("min", lax.reduce_min, lax.min, a, axis, keepdims, initial, where)


amax, amin = max, min


def _logical(reducer: Callable, a: Any, axis: Axis, keepdims: bool, where_: Any,
             identity: bool) -> Any:
    (x,) = promote_args(a, dtype=dtypes.bool_)
    return _reduce(reducer, _masked(x, where_, identity), axis, keepdims)


def all(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, *,
        where: Any = None):
    """Whether every element over ``axis`` is true (nonzero)."""
    _no_out(out, "all")
    return _logical(lax.reduce_and, a, axis, keepdims, where, True)


def any(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False, *,
        where: Any = None):
    """Whether some element over ``axis`` is true (nonzero)."""
    _no_out(out, "any")
    return _logical(lax.reduce_or, a, axis, keepdims, where, False)


def count_nonzero(a: Any, axis: Axis = None, keepdims: bool = False):
    """Number of nonzero elements over ``axis`` (default integer dtype)."""
    (x,) = promote_args(a, dtype=dtypes.bool_)
    return sum(x, axis=axis, dtype=dtypes.default_int(), keepdims=keepdims)


def _count(x: Any, axis: Axis, where_: Any, dtype: np.dtype, keepdims: bool) -> Any:
    """How many elements each reduction covers (a constant unless ``where`` is given)."""
    axes = canonicalize_axes(axis, x.ndim)
    if where_ is None:
        size = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
        return np.asarray(size, dtype)
    mask = broadcast_to_shape(promote_args(where_, dtype=dtypes.bool_)[0], x.shape)
    return sum(mask, axis=axis, dtype=dtype, keepdims=keepdims)


def _float_compute(dtype: np.dtype) -> np.dtype:
    """Half precision statistics compute in float32 (as JAX) and round at the end."""
    return dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype


def mean(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, keepdims: bool = False,
         *, where: Any = None):
    """Arithmetic mean over ``axis``; integers average as the default float."""
    _no_out(out, "mean")
    (x,) = promote_args(a)
    dtype = dtypes.canonicalize(dtype) if dtype is not None else inexact_dtype(x.dtype)
    compute = _float_compute(dtype)
    total = sum(x, axis, compute, keepdims=keepdims, where=where)
    count = _count(x, axis, where, compute, keepdims)
    return lax.convert_element_type(lax.div(*promote_args(total, count, dtype=compute)), dtype)


def var(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, mean: Any = None,
        correction: int | float | None = None):
    """Variance over ``axis`` with ``ddof`` (NumPy) or ``correction`` (Array API) dof
    removed; ``mean`` may pass the mean already computed (with ``keepdims=True``)."""
    _no_out(out, "var")
    if correction is not None:
        if ddof != 0:
            raise EmberValueError("var/std take ddof or correction, not both")
        ddof = correction
    (x,) = promote_args(a)
    dtype = dtypes.canonicalize(dtype) if dtype is not None else inexact_dtype(x.dtype)
    compute = _float_compute(dtype)
    x = lax.convert_element_type(x, compute)
    center = _mean(x, axis, keepdims=True, where=where) if mean is None else \
        lax.convert_element_type(ensure_array(mean), compute)
    centered = lax.sub(x, broadcast_to_shape(center, x.shape))
    if dtypes.is_complex(compute):
        squares = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        squares = lax.mul(centered, centered)
    total = sum(squares, axis, keepdims=keepdims, where=where)
    dof = maximum(subtract(_count(x, axis, where, total.dtype, keepdims), ddof), 0)
    result_dtype = dtypes.finfo(dtype).dtype if dtypes.is_complex(dtype) else dtype
    return lax.convert_element_type(true_divide(total, dof), result_dtype)


def std(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, mean: Any = None,
        correction: int | float | None = None):
    """Standard deviation: the square root of ``var``."""
    return lax.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                        correction=correction))


_mean = mean  # var's ``mean`` argument shadows the function


def ptp(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False):
    """Range (maximum minus minimum) over ``axis``."""
    _no_out(out, "ptp")
    return lax.sub(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def average(a: Any, axis: Axis = None, weights: Any = None, returned: bool = False, *,
            keepdims: bool = False):
    """Weighted mean over ``axis``; ``returned=True`` also gives the sum of weights."""
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        total = full(avg.shape, _count(ensure_array(a), axis, None, avg.dtype, False), avg.dtype)
    else:
        x, w = promote_args_inexact(a, weights)
        if w.shape != x.shape:
            raise EmberValueError(f"average: weights of shape {w.shape} must match a's shape "
                                  f"{x.shape} (broadcast them first)")
        total = sum(w, axis, keepdims=keepdims)
        avg = lax.div(sum(lax.mul(x, w), axis, keepdims=keepdims), total)
    return (avg, total) if returned else avg


# --- NaN-ignoring variants ---------------------------------------------------------------

def _without_nans(a: Any, replacement: Any) -> Any:
    (x,) = promote_args(a)
    if not dtypes.is_inexact(x.dtype):
        return x
    return where(isnan(x), full((), replacement, x.dtype), x)


def nansum(a: Any, axis: Axis = None, dtype: Any = None, out: None = None,
           keepdims: bool = False, **kwargs: Any):
    """``sum`` treating NaN as zero."""
    return sum(_without_nans(a, 0), axis, dtype, out, keepdims, **kwargs)


def nanprod(a: Any, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False, **kwargs: Any):
    """``prod`` treating NaN as one."""
    return prod(_without_nans(a, 1), axis, dtype, out, keepdims, **kwargs)


def _nan_extremum(fn: Callable, fill: float, a: Any, axis: Axis, keepdims: bool, initial: Any,
                  where_: Any) -> Any:
    (x,) = promote_args(a)
    if not dtypes.is_floating(x.dtype):
        return fn(x, axis, keepdims=keepdims, initial=initial, where=where_)
    out = fn(_without_nans(x, fill), axis, keepdims=keepdims, initial=initial, where=where_)
    if initial is not None:
        return out
    nothing = isnan(x) if where_ is None else lax.bitwise_or(isnan(x), lax.bitwise_not(
        broadcast_to_shape(promote_args(where_, dtype=dtypes.bool_)[0], x.shape)))
    return where(all(nothing, axis, keepdims=keepdims), full((), np.nan, x.dtype), out)


def nanmax(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None):
    """``max`` ignoring NaNs (NaN where a whole slice is NaN)."""
    _no_out(out, "nanmax")
    return _nan_extremum(max, -np.inf, a, axis, keepdims, initial, where)


def nanmin(a: Any, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None):
    """``min`` ignoring NaNs (NaN where a whole slice is NaN)."""
    _no_out(out, "nanmin")
    return _nan_extremum(min, np.inf, a, axis, keepdims, initial, where)


def _valid(a: Any, where_: Any) -> Any:
    """Elements that count: not NaN, and selected by ``where`` if given."""
    valid = lax.bitwise_not(isnan(a))
    if where_ is None:
        return valid
    mask = broadcast_to_shape(promote_args(where_, dtype=dtypes.bool_)[0], valid.shape)
    return lax.bitwise_and(valid, mask)


def nanmean(a: Any, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False, *, where: Any = None):
    """``mean`` over the elements that are not NaN."""
    return mean(a, axis, dtype, out, keepdims, where=_valid(a, where))


def nanvar(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, *, where: Any = None, mean: Any = None):
    """``var`` over the elements that are not NaN."""
    return var(a, axis, dtype, out, ddof, keepdims, where=_valid(a, where), mean=mean)


def nanstd(a: Any, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, *, where: Any = None, mean: Any = None):
    """``std`` over the elements that are not NaN."""
    return std(a, axis, dtype, out, ddof, keepdims, where=_valid(a, where), mean=mean)
