"""Covariance and correlation matrices: cov, corrcoef (NumPy's definitions, with
frequency and analytic weights as ``numpy.cov``)."""
from __future__ import annotations

from typing import Any

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._joining import concatenate
from ember.numpy._manipulation import atleast_2d, squeeze
from ember.numpy._math import clip, complex_from_parts, imag, real, true_divide
from ember.numpy._products import diagonal, matmul
from ember.numpy._promotion import ensure_array, inexact_dtype, result_dtype
from ember.numpy._reductions import sum as sum_
from ember.numpy._ufuncs import conjugate, multiply, sqrt, subtract

__all__ = ["cov", "corrcoef"]


def _variables(m: Any, y: Any, rowvar: bool) -> Any:
    """The observations as a (variables, observations) matrix of an inexact dtype."""
    dtype = inexact_dtype(result_dtype(m) if y is None else result_dtype(m, y))
    x = ensure_array(m, dtype)
    if x.ndim > 2:
        raise EmberValueError(f"cov: m must have at most 2 dimensions, got shape {x.shape}")
    x = atleast_2d(x)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        other = atleast_2d(ensure_array(y, dtype))
        if other.ndim > 2:
            raise EmberValueError(f"cov: y must have at most 2 dimensions, got shape "
                                  f"{other.shape}")
        if not rowvar and other.shape[0] != 1:
            other = other.T
        x = concatenate([x, other], axis=0)
    return x


def _weights(weights: Any, n: int, name: str, integer: bool) -> Any:
    w = ensure_array(weights)
    if w.ndim != 1 or w.shape[0] != n:
        raise EmberValueError(f"cov: {name} must be 1-D with one entry per observation "
                              f"({n}), got shape {w.shape}")
    if integer and not (dtypes.is_integer(w.dtype) or dtypes.is_bool(w.dtype)):
        raise EmberTypeError(f"cov: fweights must be integers, got {w.dtype}")
    return w


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None):
    """The covariance matrix of the variables in the rows of ``m`` (columns with
    ``rowvar=False``), plus those of ``y``; normalized by ``N - ddof`` (``ddof``: 1, or 0
    with ``bias=True``) where ``N`` is the number of observations, or with weights the
    sum of ``fweights * aweights`` less its correction. A single variable gives a 0-d
    result."""
    x = _variables(m, y, rowvar)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    w = None if fweights is None else _weights(fweights, n, "fweights", integer=True)
    a = None if aweights is None else _weights(aweights, n, "aweights", integer=False)
    if a is not None:
        w = a if w is None else multiply(w, a)
    if w is None:
        mean = true_divide(sum_(x, axis=1, keepdims=True), n)
        norm = n - ddof
    else:
        w = lax.convert_element_type(w, lax.real(x).dtype if dtypes.is_complex(x.dtype)
                                     else x.dtype)
        total = sum_(w)
        mean = true_divide(sum_(multiply(x, w), axis=1, keepdims=True), total)
        correction = ddof if a is None else true_divide(multiply(ddof, sum_(multiply(w, a))),
                                                        total)
        norm = subtract(total, correction)
    norm = clip(norm, 0, None)  # as NumPy: no negative divisor (gives inf / nan instead)
    centered = subtract(x, mean)
    weighted = centered if w is None else multiply(centered, w)
    return squeeze(true_divide(matmul(centered, conjugate(weighted).T), norm))


def corrcoef(x: Any, y: Any = None, rowvar: bool = True):
    """Pearson correlation coefficients: ``cov`` scaled by the standard deviations, with
    real (and imaginary) parts clipped to ``[-1, 1]``."""
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return true_divide(c, c)
    stddev = sqrt(real(diagonal(c)))
    c = true_divide(true_divide(c, stddev[:, None]), stddev[None, :])
    if dtypes.is_complex(c.dtype):
        return complex_from_parts(clip(real(c), -1, 1), clip(imag(c), -1, 1), c.dtype)
    return clip(c, -1, 1)

