"""Polynomials as coefficient arrays, highest power first (NumPy's legacy ``poly*``
functions): polyval, polyadd, polysub, polymul, polydiv, polyder, polyint, polyfit,
poly, vander.

As in JAX, results are floats (integers become the default float) and their shapes are
static: ``polydiv`` keeps the remainder's leading zeros and ``polymul`` the product's
unless ``trim_leading_zeros=True`` (which needs concrete values). ``roots`` gives the
eigenvalues of the companion matrix, complex, as JAX's (leading zeros stripped unless
``strip_zeros=False``).
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._convolution import convolve
from ember.numpy._creation import arange, eye, full, ones
from ember.numpy._cumulative import cumprod
from ember.numpy._joining import concatenate
from ember.numpy._math import true_divide
from ember.numpy._products import matmul, trace
from ember.numpy._promotion import (
    concrete, ensure_array, inexact_dtype, promote_args, result_dtype,
)
from ember.numpy._ufuncs import add, multiply, subtract

__all__ = ["polyval", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint",
           "polyfit", "poly", "vander", "roots"]


def _coefficients(p: Any, name: str, dtype: Any = None) -> Any:
    """A 1-D inexact coefficient array."""
    c = ensure_array(p)
    c = lax.convert_element_type(c, inexact_dtype(c.dtype if dtype is None else dtype))
    if c.ndim != 1:
        raise EmberValueError(f"{name}: coefficients must be 1-D, got shape {tuple(c.shape)}")
    return c


def _common(name: str, a1: Any, a2: Any) -> tuple[Any, Any]:
    dtype = inexact_dtype(result_dtype(a1, a2))
    return _coefficients(a1, name, dtype), _coefficients(a2, name, dtype)


def _trim_leading_zeros(c: Any, name: str) -> Any:
    values = concrete(c, f"{name}(trim_leading_zeros=True)")
    nonzero = np.flatnonzero(values)
    return c[int(nonzero[0]):] if nonzero.size else c[-1:]


def polyval(p: Any, x: Any, *, unroll: int = 16):
    """The polynomial ``p`` at ``x`` (Horner's scheme, unrolled over the coefficients)."""
    dtype = result_dtype(p, x)
    c = ensure_array(p, dtype)
    if c.ndim != 1:
        raise EmberValueError(f"polyval: coefficients must be 1-D, got shape {tuple(c.shape)}")
    (points,) = promote_args(x, dtype=dtype)
    out = full(points.shape, 0, dtype)
    for i in range(c.shape[0]):
        out = add(multiply(out, points), c[i])
    return out


def _padded(c: Any, length: int) -> Any:
    return lax.pad(c, np.zeros((), c.dtype), [(length - c.shape[0], 0, 0)])


def polyadd(a1: Any, a2: Any):
    """The sum of two polynomials."""
    x, y = _common("polyadd", a1, a2)
    n = max(x.shape[0], y.shape[0])
    return add(_padded(x, n), _padded(y, n))


def polysub(a1: Any, a2: Any):
    """The difference of two polynomials."""
    x, y = _common("polysub", a1, a2)
    n = max(x.shape[0], y.shape[0])
    return subtract(_padded(x, n), _padded(y, n))


def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False):
    """The product of two polynomials (the convolution of their coefficients)."""
    x, y = _common("polymul", a1, a2)
    if trim_leading_zeros:
        x, y = _trim_leading_zeros(x, "polymul"), _trim_leading_zeros(y, "polymul")
    return convolve(x, y)


def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """Quotient and remainder of ``u / v`` (long division; the remainder keeps ``u``'s
    length unless ``trim_leading_zeros``)."""
    dividend, divisor = _common("polydiv", u, v)
    if trim_leading_zeros:
        divisor = _trim_leading_zeros(divisor, "polydiv")
    n, m = dividend.shape[0], divisor.shape[0]
    scale = true_divide(1, divisor[0])
    quotient, remainder = [], dividend
    for k in range(n - m + 1):  # subtract q_k times the divisor shifted to position k
        q = multiply(remainder[k], scale)
        quotient.append(lax.reshape(q, (1,)))
        shifted = lax.pad(divisor, np.zeros((), divisor.dtype), [(k, n - m - k, 0)])
        remainder = subtract(remainder, multiply(q, shifted))
    q = concatenate(quotient) if quotient else ensure_array(np.zeros(1, dividend.dtype))
    if trim_leading_zeros:
        remainder = _trim_leading_zeros(remainder, "polydiv")
    return q, remainder


def polyder(p: Any, m: int = 1):
    """The ``m``-th derivative of the polynomial ``p``."""
    c = _coefficients(p, "polyder")
    m = operator.index(m)
    if m < 0:
        raise EmberValueError(f"polyder: the order m must be non-negative, got {m}")
    for _ in range(m):
        n = c.shape[0]
        if n <= 1:
            return ensure_array(np.zeros(0, c.dtype))
        c = multiply(c[:-1], arange(n - 1, 0, -1, dtype=c.dtype))
    return c


def polyint(p: Any, m: int = 1, k: Any = None):
    """The ``m``-th antiderivative of ``p``; ``k`` gives the integration constants (one
    for all, or one per integration in order: the first ends up multiplying the highest
    power)."""
    c = _coefficients(p, "polyint")
    m = operator.index(m)
    if m < 0:
        raise EmberValueError(f"polyint: the order m must be non-negative, got {m}")
    constants = ensure_array(0.0 if k is None else k, c.dtype)
    if constants.ndim == 0:
        constants = lax.broadcast_in_dim(constants, (m,), ())
    if constants.shape != (m,):
        raise EmberValueError(f"polyint: k must be a scalar or hold m = {m} constants, got "
                              f"shape {tuple(constants.shape)}")
    for i in range(m):
        n = c.shape[0]
        scaled = true_divide(c, arange(n, 0, -1, dtype=c.dtype))
        c = concatenate([scaled, lax.reshape(constants[i], (1,))])
    return c


def vander(x: Any, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix of the 1-D ``x``: column ``j`` is ``x ** (N - 1 - j)`` (or
    ``x ** j`` when ``increasing``), ``N`` columns (``len(x)`` by default)."""
    points = ensure_array(x)
    if points.ndim != 1:
        raise EmberValueError(f"vander: x must be 1-D, got shape {tuple(points.shape)}")
    n = points.shape[0] if N is None else operator.index(N)
    if n < 0:
        raise EmberValueError(f"vander: N must be non-negative, got {n}")
    if n == 0:
        return ensure_array(np.zeros((points.shape[0], 0), points.dtype))
    columns = [ones((points.shape[0], 1), points.dtype)] + \
        [lax.broadcast_in_dim(points, (points.shape[0], n - 1), (0,))] * (n > 1)
    powers = cumprod(concatenate(columns, axis=1), axis=1) if n > 1 else columns[0]
    powers = lax.convert_element_type(powers, points.dtype)
    return powers if increasing else lax.rev(powers, (1,))


def poly(seq_of_zeros: Any):
    """The monic polynomial with the given roots (1-D), or the characteristic polynomial
    of a square matrix (by the Faddeev-LeVerrier recursion, no eigenvalues needed)."""
    z = ensure_array(seq_of_zeros)
    z = lax.convert_element_type(z, inexact_dtype(z.dtype))
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] > 0:
        return _characteristic(z)
    if z.ndim != 1:
        raise EmberValueError(f"poly: needs 1-D roots or a square matrix, got shape "
                              f"{tuple(z.shape)}")
    c = ensure_array(np.ones(1, z.dtype))
    for i in range(z.shape[0]):
        c = convolve(c, concatenate([ensure_array(np.ones(1, z.dtype)),
                                     lax.reshape(lax.neg(z[i]), (1,))]))
    return c


def _characteristic(a: Any) -> Any:
    """``det(x I - a)``'s coefficients: ``c_k = -trace(a M_k) / k`` with
    ``M_k = a M_{k-1} + c_{k-1} I``."""
    n = a.shape[0]
    identity = eye(n, dtype=a.dtype)
    coefficients = [ensure_array(1.0, a.dtype)]
    m = identity
    for k in range(1, n + 1):
        am = matmul(a, m)
        c = true_divide(trace(am), -k)
        coefficients.append(c)
        m = add(am, multiply(c, identity))
    return concatenate([lax.reshape(c, (1,)) for c in coefficients])


def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False,
            w: Any = None, cov: bool | str = False):
    """Least-squares polynomial fit of degree ``deg`` to the points ``(x, y)`` (``y`` may
    hold several data sets in its columns), weighted by ``w``; the coefficients, with
    ``full`` also the residuals, rank, singular values and ``rcond``, or with ``cov``
    the coefficients' covariance (scaled by the residual variance unless
    ``cov='unscaled'``)."""
    from ember.numpy import linalg

    deg = operator.index(deg)
    if deg < 0:
        raise EmberValueError(f"polyfit: deg must be non-negative, got {deg}")
    dtype = inexact_dtype(result_dtype(x, y))
    points, values = ensure_array(x, dtype), ensure_array(y, dtype)
    if points.ndim != 1 or values.ndim not in (1, 2) or values.shape[0] != points.shape[0]:
        raise EmberValueError(f"polyfit: x must be 1-D and y 1-D or 2-D with as many rows, got "
                              f"shapes {tuple(points.shape)} and {tuple(values.shape)}")
    if dtypes.is_complex(dtype) and cov:
        raise EmberTypeError("polyfit: cov=True is not supported for complex data")
    n = points.shape[0]
    rcond = n * float(dtypes.finfo(dtype).eps) if rcond is None else rcond
    lhs, rhs = vander(points, deg + 1), values
    if w is not None:
        weights = ensure_array(w, dtype)
        if weights.shape != (n,):
            raise EmberValueError(f"polyfit: w must be 1-D with one weight per point ({n}), got "
                                  f"shape {tuple(weights.shape)}")
        lhs = multiply(lhs, weights[:, None])
        rhs = multiply(rhs, weights if rhs.ndim == 1 else weights[:, None])
    scale = linalg.vector_norm(lhs, axis=0)  # unit columns condition the solve
    scaled = true_divide(lhs, scale)
    solution, residuals, rank, singular = linalg.lstsq(scaled, rhs, rcond)
    coefficients = true_divide(solution.T, scale).T
    if full:
        return coefficients, residuals, rank, singular, ensure_array(rcond, dtype)
    if cov:
        base = true_divide(linalg.inv(matmul(scaled.T, scaled)),
                           multiply(scale[:, None], scale[None, :]))
        if cov == "unscaled":
            factor = ensure_array(1.0, dtype)
        else:
            if n <= deg + 1:
                raise EmberValueError(f"polyfit: cov needs more points ({n}) than coefficients "
                                      f"({deg + 1}) to scale by the residuals")
            factor = true_divide(residuals, n - deg - 1)
        if values.ndim == 1:
            return coefficients, multiply(base, factor)
        return coefficients, multiply(base[:, :, None], factor)
    return coefficients


def roots(p: Any, *, strip_zeros: bool = True):
    """The roots of the polynomial with coefficients ``p`` (highest power first), as the
    eigenvalues of its companion matrix; complex. ``strip_zeros`` drops leading zeros
    and turns trailing ones into zero roots (it needs concrete coefficients); without
    it, a leading zero gives NaN roots (shapes are static)."""
    from ember.lax import linalg as lax_linalg

    c = _coefficients(p, "roots")
    complex_dtype = np.result_type(c.dtype, np.complex64)
    trailing = 0
    if strip_zeros:
        nonzero = np.flatnonzero(concrete(c, "roots(strip_zeros=True)"))
        if nonzero.size == 0:
            return ensure_array(np.zeros(0, complex_dtype))
        trailing = c.shape[0] - 1 - int(nonzero[-1])
        c = c[int(nonzero[0]):c.shape[0] - trailing]
    n = c.shape[0] - 1
    found = [ensure_array(np.zeros(trailing, complex_dtype))]
    if n > 0:
        first_row = lax.reshape(true_divide(lax.neg(c[1:]), c[0]), (1, n))
        companion = concatenate([first_row, eye(n - 1, n, dtype=c.dtype)], axis=0)
        (eigenvalues,) = lax_linalg.eig(companion, compute_left_eigenvectors=False,
                                        compute_right_eigenvectors=False)
        found.insert(0, eigenvalues)
    return concatenate(found)
