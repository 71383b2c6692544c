"""Order statistics: quantile, percentile, median (one sort, then interpolation).

As NumPy, ``q`` may be a scalar or a 1-D array (its axes come first in the result) and
a slice containing NaN gives NaN.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axes
from ember.numpy._manipulation import moveaxis, reshape
from ember.numpy._math import isnan, where
from ember.numpy._promotion import broadcast_to_shape, ensure_array, inexact_dtype
from ember.numpy._reductions import any as any_
from ember.numpy._sorting import sort
from ember.numpy.indexing import take

__all__ = ["quantile", "percentile", "median"]

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


def quantile(a: Any, q: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
             overwrite_input: bool = False, method: str = "linear", keepdims: bool = False):
    """The ``q``-th quantiles (``0 <= q <= 1``) over ``axis`` (all axes by default)."""
    if method not in _METHODS:
        raise EmberValueError(f"quantile: method must be one of {_METHODS}, got {method!r}")
    x = ensure_array(a)
    x = lax.convert_element_type(x, inexact_dtype(x.dtype))
    axes = canonicalize_axes(axis, x.ndim)
    kept = [d for i, d in enumerate(x.shape) if i not in axes]
    flat = reshape(moveaxis(x, axes, tuple(range(-len(axes), 0))), (*kept, -1))
    n = flat.shape[-1]
    if n == 0:
        raise EmberValueError(f"quantile of an empty selection: axis {axis} of shape {x.shape}")
    quantiles = ensure_array(q, x.dtype)
    if quantiles.ndim > 1:
        raise EmberValueError(f"quantile: q must be a scalar or 1-D, got shape {quantiles.shape}")
    ordered = sort(flat, axis=-1)
    position = lax.mul(reshape(quantiles, (-1,)), float(n - 1))  # one entry per quantile

    def at(index_of_position: Any) -> Any:  # (len(q), *kept): values at rounded positions
        index = lax.convert_element_type(index_of_position, dtypes.default_int())
        return moveaxis(take(ordered, index, axis=-1, mode="clip"), -1, 0)

    lower, upper = at(lax.floor(position)), at(lax.ceil(position))

    def per_quantile(v: Any) -> Any:
        return lax.broadcast_in_dim(v, lower.shape, (0,))

    fraction = lax.sub(position, lax.floor(position))
    result = _interpolate(lower, upper, per_quantile(fraction), per_quantile(position), method)
    has_nan = broadcast_to_shape(any_(isnan(flat), axis=-1), lower.shape)
    result = where(has_nan, np.nan, result)
    reduced = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keepdims else \
        tuple(kept)
    return reshape(result, quantiles.shape + reduced)


def percentile(a: Any, q: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False):
    """The ``q``-th percentiles (``0 <= q <= 100``)."""
    from ember.numpy._math import true_divide

    return quantile(a, true_divide(q, 100), axis, out, overwrite_input, method, keepdims)


def median(a: Any, axis: int | tuple[int, ...] | None = None, out: None = None,
           overwrite_input: bool = False, keepdims: bool = False):
    """The median over ``axis`` (the mean of the two middle values for even counts)."""
    return quantile(a, 0.5, axis, keepdims=keepdims)
