"""Order statistics: quantile, percentile, median and their NaN-skipping variants
(one sort, then interpolation).

As NumPy, ``q`` may be a scalar or a 1-D array (its axes come first in the result); a
slice containing NaN gives NaN, and for the ``nan*`` variants a slice of only NaNs.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axes
from ember.numpy._manipulation import moveaxis, reshape
from ember.numpy._creation import full
from ember.numpy._math import clip, isnan, true_divide, where
from ember.numpy._promotion import ensure_array, inexact_dtype
from ember.numpy._reductions import any as any_
from ember.numpy._reductions import sum as sum_
from ember.numpy._sorting import sort
from ember.numpy._ufuncs import logical_not, multiply, subtract
from ember.numpy.indexing import take_along_axis

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian"]

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _interpolate(lower: Any, upper: Any, fraction: Any, position: Any, method: str) -> Any:
    if method == "lower":
        return lower
    if method == "higher":
        return upper
    if method == "midpoint":
        return lax.mul(lax.add(lower, upper), 0.5)
    if method == "nearest":  # half to even, as NumPy
        floor = lax.floor(position)
        up = lax.gt(fraction, 0.5)
        tie = lax.eq(fraction, 0.5)
        odd = lax.ne(lax.rem(floor, 2.0), 0.0)
        return where(lax.bitwise_or(up, lax.bitwise_and(tie, odd)), upper, lower)
    return lax.add(lower, lax.mul(lax.sub(upper, lower), fraction))


def _quantile(name: str, a: Any, q: Any, axis: Any, method: str, keepdims: bool,
              skip_nan: bool) -> Any:
    """Quantiles over ``axis``: sort (NaNs last), then interpolate between the two values
    around ``q * (n - 1)``, where ``n`` counts the non-NaN values of each slice when
    ``skip_nan`` (else every value, and a slice holding NaN gives NaN)."""
    if method not in _METHODS:
        raise EmberValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    x = ensure_array(a)
    x = lax.convert_element_type(x, inexact_dtype(x.dtype))
    axes = canonicalize_axes(axis, x.ndim)
    kept = [d for i, d in enumerate(x.shape) if i not in axes]
    flat = reshape(moveaxis(x, axes, tuple(range(-len(axes), 0))), (*kept, -1))
    if flat.shape[-1] == 0:
        raise EmberValueError(f"{name} of an empty selection: axis {axis} of shape {x.shape}")
    quantiles = ensure_array(q, x.dtype)
    if quantiles.ndim > 1:
        raise EmberValueError(f"{name}: q must be a scalar or 1-D, got shape {quantiles.shape}")
    ordered = sort(flat, axis=-1)
    nan = isnan(flat)
    if skip_nan:
        count = sum_(logical_not(nan), axis=-1, keepdims=True, dtype=x.dtype)
    else:
        count = full((*kept, 1), flat.shape[-1], x.dtype)
    # One position per slice and quantile: shape (*kept, len(q)).
    position = multiply(subtract(count, 1), reshape(quantiles, (-1,)))

    def at(rounded: Any) -> Any:
        index = clip(lax.convert_element_type(rounded, dtypes.default_int()), 0, None)
        return take_along_axis(ordered, index, axis=-1, mode="clip")

    floor = lax.floor(position)
    lower, upper = at(floor), at(lax.ceil(position))
    result = _interpolate(lower, upper, lax.sub(position, floor), position, method)
    no_value = lax.eq(count, 0.0) if skip_nan else any_(nan, axis=-1, keepdims=True)
    result = moveaxis(where(no_value, np.nan, result), -1, 0)
    reduced = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keepdims else \
        tuple(kept)
    return reshape(result, quantiles.shape + reduced)


def quantile(a: Any, q: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
             overwrite_input: bool = False, method: str = "linear", keepdims: bool = False):
    """The ``q``-th quantiles (``0 <= q <= 1``) over ``axis`` (all axes by default)."""
    return _quantile("quantile", a, q, axis, method, keepdims, skip_nan=False)


def nanquantile(a: Any, q: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
                overwrite_input: bool = False, method: str = "linear", keepdims: bool = False):
    """``quantile`` of the values that are not NaN (NaN where a slice has none)."""
    return _quantile("nanquantile", a, q, axis, method, keepdims, skip_nan=True)


def percentile(a: Any, q: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False):
    """The ``q``-th percentiles (``0 <= q <= 100``)."""
    return quantile(a, true_divide(q, 100), axis, out, overwrite_input, method, keepdims)


def nanpercentile(a: Any, q: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False):
    """``percentile`` of the values that are not NaN."""
    return nanquantile(a, true_divide(q, 100), axis, out, overwrite_input, method, keepdims)


def median(a: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
           overwrite_input: bool = False, keepdims: bool = False):
    """The median over ``axis`` (the mean of the two middle values for even counts)."""
    return quantile(a, 0.5, axis, keepdims=keepdims)


def nanmedian(a: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
              overwrite_input: bool = False, keepdims: bool = False):
    """``median`` of the values that are not NaN."""
    return nanquantile(a, 0.5, axis, keepdims=keepdims)
