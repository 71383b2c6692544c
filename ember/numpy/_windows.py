"""Window functions for signal processing: bartlett, blackman, hamming, hanning, kaiser,
and the modified Bessel function ``i0`` that ``kaiser`` needs.

Windows are symmetric, of static length ``M`` (empty for ``M < 1``, ``[1.]`` for
``M == 1``), in the default float dtype, as NumPy's formulas.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError
from ember.numpy._creation import arange, ones
from ember.numpy._math import true_divide, where
from ember.numpy._promotion import concrete, constant_like, ensure_array, promote_args_inexact
from ember.numpy._ufuncs import abs as abs_
from ember.numpy._ufuncs import add, cos, multiply, sqrt, subtract

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser", "i0"]

# i0 sums its power series up to |x| = _SERIES_LIMIT and uses the large-x asymptotic
# expansion beyond it; these term counts reach float64 round-off on either side.
_SERIES_LIMIT = 30.0
_SERIES_TERMS = 48
_ASYMPTOTIC_TERMS = 24


def _series(x: Any) -> Any:
    """``sum_k ((x / 2) ** 2k) / (k!) ** 2`` (every term positive: no cancellation)."""
    quarter_square = lax.mul(lax.mul(x, x), constant_like(0.25, x))
    term = total = constant_like(1, x)
    for k in range(1, _SERIES_TERMS + 1):
        term = lax.mul(term, lax.div(quarter_square, constant_like(k * k, x)))
        total = lax.add(total, term)
    return total


def _asymptotic(x: Any) -> Any:
    """``e**x / sqrt(2 pi x) * sum_k c_k / x**k`` with ``c_k = prod (2j-1)**2 / (8 j)``."""
    coefficients = [1.0]
    for k in range(1, _ASYMPTOTIC_TERMS + 1):
        coefficients.append(coefficients[-1] * (2 * k - 1) ** 2 / (8 * k))
    inverse = lax.div(constant_like(1, x), x)
    total = constant_like(coefficients[-1], x)
    for c in reversed(coefficients[:-1]):
        total = lax.add(lax.mul(total, inverse), constant_like(c, x))
    # e**(x/2) twice: no overflow unless the result overflows, and no rounding of x.
    half = lax.exp(lax.mul(x, 0.5))
    return lax.mul(half, lax.mul(lax.div(half, lax.sqrt(lax.mul(x, 2 * math.pi))), total))


def i0(x: Any):
    """The modified Bessel function of the first kind, order 0, elementwise (computed in
    at least float32)."""
    (x,) = promote_args_inexact(x)
    if dtypes.is_complex(x.dtype):
        raise EmberTypeError(f"i0 is not defined for complex dtype {x.dtype}")
    compute = dtypes.float64 if x.dtype == dtypes.float64 else dtypes.float32
    magnitude = lax.abs(lax.convert_element_type(x, compute))
    limit = constant_like(_SERIES_LIMIT, magnitude)
    small = lax.min(magnitude, limit)  # each branch sees only inputs it handles well
    large = lax.max(magnitude, limit)
    out = where(lax.le(magnitude, limit), _series(small), _asymptotic(large))
    return lax.convert_element_type(out, x.dtype)


def _length(M: Any, name: str) -> int:
    return operator.index(concrete(M, f"{name}(M)").item())


def _cosine_window(name: str, coefficients: tuple[float, ...]):
    """``sum_j a_j cos(j pi n / (M - 1))`` over ``n = 1 - M, 3 - M, ..., M - 1``."""

    def window(M: int):
        m = _length(M, name)
        dtype = dtypes.default_float()
        if m < 1:
            return ensure_array(np.zeros(0, dtype))
        if m == 1:
            return ones(1, dtype)
        phase = multiply(arange(1 - m, m, 2, dtype=dtype), math.pi / (m - 1))
        out = constant_like(coefficients[0], phase)
        for j, a in enumerate(coefficients[1:], start=1):
            out = add(out, multiply(a, cos(multiply(phase, float(j)))))
        return out

    window.__name__ = window.__qualname__ = name
    window.__doc__ = (f"The {name} window of ``M`` points: "
                      + " + ".join(f"{a} cos({j} pi n / (M - 1))" if j else str(a)
                                   for j, a in enumerate(coefficients)) + ".")
    return window


blackman = _cosine_window("blackman", (0.42, 0.5, 0.08))
hamming = _cosine_window("hamming", (0.54, 0.46))
hanning = _cosine_window("hanning", (0.5, 0.5))


def bartlett(M: int):
    """The Bartlett (triangular) window of ``M`` points: ``1 - |n| / (M - 1)``."""
    m = _length(M, "bartlett")
    dtype = dtypes.default_float()
    if m < 1:
        return ensure_array(np.zeros(0, dtype))
    if m == 1:
        return ones(1, dtype)
    return subtract(1.0, true_divide(abs_(arange(1 - m, m, 2, dtype=dtype)), m - 1))


def kaiser(M: int, beta: Any):
    """The Kaiser window of ``M`` points and shape ``beta``:
    ``i0(beta sqrt(1 - (2 n / (M - 1) - 1) ** 2)) / i0(beta)``."""
    m = _length(M, "kaiser")
    dtype = dtypes.default_float()
    if m < 1:
        return ensure_array(np.zeros(0, dtype))
    if m == 1:
        return ones(1, dtype)
    (shape,) = promote_args_inexact(beta)
    alpha = (m - 1) / 2
    offset = true_divide(subtract(arange(0, m, dtype=dtype), alpha), alpha)
    radius = sqrt(subtract(1.0, multiply(offset, offset)))
    return true_divide(i0(multiply(shape, radius)), i0(shape))
