"""``ember.numpy.linalg``: the Array API linear algebra extension and NumPy's
``numpy.linalg``, on the decomposition primitives of ``ember.lax.linalg``.

Every function maps over leading (batch) axes. As in JAX, failures do not raise: a
singular matrix gives inf / NaN entries, a matrix that is not positive definite a NaN
Cholesky factor. ``eig`` and ``eigvals`` (general matrices) always return complex
arrays, as in JAX, run on the host on every backend and are not differentiable.
"""
from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember import lax
from ember.lax import linalg as lax_linalg
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axes
from ember.numpy._creation import eye, zeros
from ember.numpy._manipulation import matrix_transpose, moveaxis
from ember.numpy._math import isnan, true_divide, where
from ember.numpy._products import cross as _cross
from ember.numpy._products import diagonal as _diagonal
from ember.numpy._products import matmul, outer, tensordot, vecdot
from ember.numpy._promotion import (
    broadcast_shapes, broadcast_to_shape, ensure_array, inexact_dtype,
)
from ember.numpy._reductions import any as any_
from ember.numpy._reductions import max as max_
from ember.numpy._reductions import min as min_
from ember.numpy._reductions import prod, sum as sum_
from ember.numpy._ufuncs import abs as abs_
from ember.numpy._ufuncs import conj, greater, log, multiply, sqrt

__all__ = [
    "matmul", "tensordot", "vecdot", "outer", "matrix_transpose", "trace", "diagonal", "cross",
    "cholesky", "det", "slogdet", "inv", "solve", "qr", "eigh", "eigvalsh", "eig", "eigvals",
    "norm",
    "vector_norm", "matrix_norm", "svdvals", "matrix_rank", "pinv", "matrix_power",
    "multi_dot", "svd", "lstsq", "cond", "tensorinv", "tensorsolve",
]


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


def _matrices(x: Any, name: str, square: bool = True) -> Any:
    """``x`` as an inexact stack of (square) matrices."""
    a = ensure_array(x)
    a = lax.convert_element_type(a, inexact_dtype(a.dtype))
    if a.ndim < 2:
        raise EmberValueError(f"{name} needs a matrix (or a stack of them), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise EmberValueError(f"{name} needs square matrices, got shape {a.shape}")
    return a


def _conj_transpose(a: Any) -> Any:
    return conj(matrix_transpose(a))


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None):
    """Sum of the ``offset`` diagonal of the last two axes."""
    return sum_(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def diagonal(x: Any, /, *, offset: int = 0):
    """The ``offset`` diagonal of the last two axes."""
    return _diagonal(x, offset, -2, -1)


def cross(x1: Any, x2: Any, /, *, axis: int = -1):
    return _cross(x1, x2, axis=axis)


def cholesky(a: Any, /, *, upper: bool = False, symmetrize_input: bool = True):
    """Cholesky factor: lower ``L`` with ``a = L @ L^H`` (``upper=True``: ``U = L^H``)."""
    factor = lax_linalg.cholesky(_matrices(a, "cholesky"), symmetrize_input=symmetrize_input)
    return _conj_transpose(factor) if upper else factor


def _lu_parts(a: Any) -> tuple[Any, Any, Any]:
    """LU factors, the diagonal of U and the permutation's parity (1 if odd)."""
    lu, pivots, permutation = lax_linalg.lu(a)
    diag = _diagonal(lu, 0, -2, -1)
    iota = lax.broadcasted_iota(pivots.dtype, pivots.shape, pivots.ndim - 1)
    swaps = sum_(lax.ne(pivots, iota), axis=-1)
    odd = lax.rem(swaps, broadcast_to_shape(np.asarray(2, swaps.dtype), swaps.shape))
    return lu, diag, odd


def _parity_sign(odd: Any, dtype: np.dtype) -> Any:
    ones = broadcast_to_shape(np.ones((), dtype), odd.shape)
    return where(lax.eq(odd, broadcast_to_shape(np.zeros((), odd.dtype), odd.shape)), ones,
                 lax.neg(ones))


def det(a: Any, /):
    """Determinant, from the LU decomposition."""
    m = _matrices(a, "det")
    _, diag, odd = _lu_parts(m)
    return lax.mul(_parity_sign(odd, m.dtype), prod(diag, axis=-1))


def slogdet(a: Any, /) -> SlogdetResult:
    """Sign (a unit complex number for complex input) and log of ``|det(a)|``."""
    m = _matrices(a, "slogdet")
    _, diag, odd = _lu_parts(m)
    magnitude = abs_(diag)
    logabsdet = sum_(log(magnitude), axis=-1)
    if dtypes.is_complex(m.dtype):
        safe = where(lax.eq(magnitude, 0), 1, magnitude)
        phases = where(lax.eq(magnitude, 0), 0, lax.div(diag, lax.convert_element_type(
            safe, m.dtype)))
        sign = lax.mul(_parity_sign(odd, m.dtype), prod(phases, axis=-1))
    else:
        sign = lax.mul(_parity_sign(odd, m.dtype), prod(lax.sign(diag), axis=-1))
    return SlogdetResult(sign, logabsdet)


def solve(a: Any, b: Any, /):
    """Solution ``x`` of ``a @ x = b``; ``b`` is a vector only if it is 1-D (NumPy 2)."""
    from ember.numpy.indexing import take_along_axis

    m = _matrices(a, "solve")
    rhs = ensure_array(b)
    dtype = inexact_dtype(dtypes.promote_types(m.dtype, rhs.dtype))
    m, rhs = lax.convert_element_type(m, dtype), lax.convert_element_type(rhs, dtype)
    vector = rhs.ndim == 1
    if vector:
        rhs = lax.reshape(rhs, (rhs.shape[0], 1))
    if rhs.shape[-2] != m.shape[-1]:
        raise EmberValueError(f"solve: a of shape {m.shape} and b of shape {tuple(np.shape(b))} "
                              f"do not match ({m.shape[-1]} unknowns)")
    batch = broadcast_shapes(m.shape[:-2], rhs.shape[:-2])
    m = broadcast_to_shape(m, batch + m.shape[-2:])
    rhs = broadcast_to_shape(rhs, batch + rhs.shape[-2:])
    lu, _, permutation = lax_linalg.lu(m)
    rows = broadcast_to_shape(lax.expand_dims(permutation, (permutation.ndim,)), rhs.shape)
    permuted = take_along_axis(rhs, rows, axis=-2)
    y = lax_linalg.triangular_solve(lu, permuted, left_side=True, lower=True,
                                    unit_diagonal=True)
    x = lax_linalg.triangular_solve(lu, y, left_side=True, lower=False)
    return lax.reshape(x, x.shape[:-1]) if vector else x


def inv(a: Any, /):
    """Inverse matrix (a singular matrix gives inf / NaN entries)."""
    m = _matrices(a, "inv")
    identity = broadcast_to_shape(eye(m.shape[-1], dtype=m.dtype), m.shape)
    return solve(m, identity)


def qr(a: Any, /, mode: str = "reduced"):
    """QR decomposition; ``mode`` is 'reduced', 'complete' or 'r' (only R)."""
    if mode not in ("reduced", "complete", "r"):
        raise EmberValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    q, r = lax_linalg.qr(_matrices(a, "qr", square=False), full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def eigh(a: Any, /, UPLO: str = "L", *, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors (columns) of Hermitian matrices."""
    if UPLO not in ("L", "U"):
        raise EmberValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = lax_linalg.eigh(_matrices(a, "eigh"), lower=UPLO == "L",
                           symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a: Any, /, UPLO: str = "L"):
    return eigh(a, UPLO).eigenvalues


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


def eig(a: Any, /) -> EigResult:
    """Eigenvalues and right eigenvectors (unit columns) of general square matrices,
    complex, in no particular order."""
    w, v = lax_linalg.eig(_matrices(a, "eig"), compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: Any, /):
    """Eigenvalues of general square matrices (complex)."""
    (w,) = lax_linalg.eig(_matrices(a, "eigvals"), compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)
    return w


def _singular_triplets(m: Any) -> tuple[Any, Any, Any]:
    """Singular values (descending) with the left and right singular vectors (columns)
    of the reduced SVD."""
    u, s, vh = lax_linalg.svd(m, full_matrices=False)
    return s, u, _conj_transpose(vh)


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: Any = None):
    """``a = U @ diag(S) @ Vh`` with singular values ``S`` descending; ``U`` and ``Vh``
    square with ``full_matrices`` (else ``min(m, n)`` columns / rows); only ``S`` without
    ``compute_uv``. ``hermitian`` is accepted and changes nothing (the general algorithm
    also serves Hermitian matrices)."""
    m = _matrices(a, "svd", square=False)
    if not compute_uv:
        return lax_linalg.svd(m, compute_uv=False, subset_by_index=subset_by_index)
    u, s, vh = lax_linalg.svd(m, full_matrices=full_matrices, subset_by_index=subset_by_index)
    return SVDResult(u, s, vh)


def svdvals(x: Any, /):
    """Singular values, descending (see the module docstring)."""
    return _singular_triplets(_matrices(x, "svdvals", square=False))[0]


def vector_norm(x: Any, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                ord: float = 2):
    """``ord``-norm over ``axis`` (all axes by default): inf, -inf, 0 (count), or any p."""
    v = ensure_array(x)
    v = lax.convert_element_type(v, inexact_dtype(v.dtype))
    axes = canonicalize_axes(axis, v.ndim)
    magnitude = abs_(v)
    if ord == math.inf:  # (as JAX's: 0 for an empty vector; at 0, 0 shares the slope)
        return max_(magnitude, axes, keepdims=keepdims, initial=0)
    if ord == -math.inf:
        return min_(magnitude, axes, keepdims=keepdims)
    if ord == 0:
        nonzero = lax.convert_element_type(lax.ne(magnitude, 0), magnitude.dtype)
        return sum_(nonzero, axes, keepdims=keepdims)
    if ord == 1:
        return sum_(magnitude, axes, keepdims=keepdims)
    if ord == 2:
        return sqrt(sum_(lax.mul(magnitude, magnitude), axes, keepdims=keepdims))
    from ember.numpy._math import power

    return power(sum_(power(magnitude, float(ord)), axes, keepdims=keepdims), 1.0 / ord)


def _keep_matrix_axes(out: Any, keepdims: bool) -> Any:
    return lax.expand_dims(out, (out.ndim, out.ndim + 1)) if keepdims else out


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro"):
    """Norm of the matrices in the last two axes: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf."""
    m = _matrices(x, "matrix_norm", square=False)
    if ord == "fro":
        return vector_norm(m, axis=(-2, -1), keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        s = svdvals(m)
        reduced = {"nuc": sum_, 2: max_, -2: min_}[ord](s, axis=-1)
        return _keep_matrix_axes(reduced, keepdims)
    if ord in (1, -1, math.inf, -math.inf):
        summed_axis = -2 if ord in (1, -1) else -1
        sums = sum_(abs_(m), axis=summed_axis)
        reduced = (max_ if ord in (1, math.inf) else min_)(sums, axis=-1)
        return _keep_matrix_axes(reduced, keepdims)
    raise EmberValueError(f"matrix_norm: unsupported ord {ord!r}; use 'fro', 'nuc', 1, -1, 2, "
                          "-2, inf or -inf")


def norm(x: Any, ord: Any = None, axis: int | Sequence[int] | None = None,
         keepdims: bool = False):
    """NumPy's ``norm``: a vector norm over one axis, a matrix norm over two."""
    v = ensure_array(x)
    if axis is None:
        if ord is None:
            return vector_norm(v, axis=None, keepdims=keepdims)
        if v.ndim not in (1, 2):
            raise EmberValueError(f"norm: ord={ord!r} needs a 1-D or 2-D array or axis=, got "
                                  f"shape {v.shape}")
        axis = tuple(range(v.ndim))
    axes = canonicalize_axes(axis, v.ndim)
    if len(axes) == 1:
        return vector_norm(v, axis=axes, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) == 2:
        moved = moveaxis(v, axes, (-2, -1))
        out = matrix_norm(moved, keepdims=False, ord="fro" if ord is None else ord)
        if keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(v.shape))
            out = lax.reshape(out, shape)
        return out
    raise EmberValueError(f"norm: axis must name 1 or 2 axes, got {axis!r}")


def _cutoff(s: Any, rows: int, cols: int, rtol: Any) -> Any:
    """Singular values at or below this count as zero: ``rtol`` times the largest one
    (default ``max(rows, cols) * eps``, as NumPy 2 and the Array API)."""
    relative = max(rows, cols) * dtypes.finfo(s.dtype).eps if rtol is None else rtol
    return multiply(max_(s, axis=-1, keepdims=True), relative)


def matrix_rank(A: Any, /, *, rtol: Any = None, tol: Any = None):
    """Number of singular values above the tolerance (``tol`` absolute or ``rtol``)."""
    m = _matrices(A, "matrix_rank", square=False)
    s = svdvals(m)
    cutoff = _cutoff(s, *m.shape[-2:], rtol) if tol is None else tol
    return sum_(greater(s, cutoff), axis=-1)


def pinv(a: Any, /, *, rtol: Any = None, hermitian: bool = False):
    """Moore-Penrose pseudo-inverse: ``V diag(1/s) U^H`` over the singular values above
    ``rtol`` times the largest."""
    m = _matrices(a, "pinv", square=False)
    s, left, right = _singular_triplets(m)
    keep = greater(s, _cutoff(s, *m.shape[-2:], rtol))
    inverse_s = where(keep, true_divide(1, where(keep, s, 1)), 0)
    return matmul(multiply(right, lax.expand_dims(inverse_s, (s.ndim - 1,))),
                  _conj_transpose(left))


def matrix_power(a: Any, n: int):
    """``a`` multiplied by itself ``n`` times (``n < 0`` uses the inverse)."""
    m = ensure_array(a)
    n = operator.index(n)
    if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
        raise EmberValueError(f"matrix_power needs square matrices, got shape {m.shape}")
    if n == 0:
        return broadcast_to_shape(eye(m.shape[-1], dtype=m.dtype), m.shape)
    if n < 0:
        m, n = inv(m), -n
    result = None
    while n:
        if n & 1:
            result = m if result is None else matmul(result, m)
        n >>= 1
        if n:
            m = matmul(m, m)
    return result


def multi_dot(arrays: Sequence[Any], *, precision: Any = None):
    """``arrays[0] @ arrays[1] @ ...`` (evaluated left to right)."""
    if len(arrays) < 2:
        raise EmberValueError("multi_dot needs at least two arrays")
    result = arrays[0]
    for other in arrays[1:]:
        result = matmul(result, other)
    return result


class LstsqResult(NamedTuple):
    x: Any
    residuals: Any
    rank: Any
    s: Any


def lstsq(a: Any, b: Any, rcond: Any = None, *, numpy_resid: bool = False) -> LstsqResult:
    """The least-squares solution ``x`` of ``a @ x = b`` (minimal norm when ``a`` has
    dependent columns), the squared residual norms (per column of ``b``), the rank of
    ``a`` and its singular values. Singular values at or below ``rcond`` times the
    largest count as zero (default ``eps * max(M, N)``). As JAX, residuals are always
    computed; ``numpy_resid=True`` gives NumPy's empty residuals when the rank is below
    N or M <= N (that needs a concrete ``a``)."""
    m = _matrices(a, "lstsq", square=False)
    if m.ndim != 2:
        raise EmberValueError(f"lstsq needs a 2-D matrix a, got shape {m.shape}")
    rhs = ensure_array(b)
    dtype = inexact_dtype(dtypes.promote_types(m.dtype, rhs.dtype))
    m, rhs = lax.convert_element_type(m, dtype), lax.convert_element_type(rhs, dtype)
    if rhs.ndim not in (1, 2) or rhs.shape[0] != m.shape[0]:
        raise EmberValueError(f"lstsq: b must be 1-D or 2-D with {m.shape[0]} rows (as a of "
                              f"shape {m.shape}), got shape {rhs.shape}")
    s, left, right = _singular_triplets(m)
    keep = greater(s, _cutoff(s, *m.shape, rcond))
    inverse_s = where(keep, true_divide(1, where(keep, s, 1)), 0)
    columns = rhs if rhs.ndim == 2 else lax.reshape(rhs, (rhs.shape[0], 1))
    x = matmul(right, multiply(lax.expand_dims(inverse_s, (1,)),
                               matmul(_conj_transpose(left), columns)))
    residuals = sum_(lax.square(abs_(lax.sub(matmul(m, x), columns))), axis=0)
    rank = sum_(keep, axis=-1)
    if numpy_resid and (int(rank) < m.shape[1] or m.shape[0] <= m.shape[1]):
        residuals = zeros((0,), residuals.dtype)
    return LstsqResult(x if rhs.ndim == 2 else lax.reshape(x, (x.shape[0],)), residuals, rank,
                       s)


def cond(x: Any, p: Any = None):
    """The condition number: the ratio of the largest to the smallest singular value
    (``p`` None, 2 or -2 for the reverse), else ``norm(x, p) * norm(inv(x), p)``;
    inf for singular matrices."""
    m = _matrices(x, "cond", square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = svdvals(m)
        large, small = max_(s, axis=-1), min_(s, axis=-1)
        return true_divide(small, large) if p == -2 else true_divide(large, small)
    out = multiply(norm(m, p, axis=(-2, -1)), norm(inv(m), p, axis=(-2, -1)))
    nan_input = any_(isnan(m), axis=(-2, -1))
    return where(lax.bitwise_and(isnan(out), lax.bitwise_not(nan_input)), np.inf, out)


def _fold(shape: Sequence[int], name: str, split: int) -> tuple[int, int]:
    rows, cols = math.prod(shape[:split]), math.prod(shape[split:])
    if rows != cols:
        raise EmberValueError(f"{name}: the first and last dimensions of shape {tuple(shape)} "
                              f"must have equal products to make a square matrix, got "
                              f"{rows} and {cols}")
    return rows, cols


def tensorinv(a: Any, ind: int = 2):
    """The inverse of ``a`` as a tensor operator of its first ``ind`` dimensions: the
    result ``ainv`` has shape ``a.shape[ind:] + a.shape[:ind]`` and
    ``tensordot(ainv, a, ind)`` is the identity."""
    t = ensure_array(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise EmberValueError(f"tensorinv: ind must be positive, got {ind}")
    size = _fold(t.shape, "tensorinv", ind)
    inverse = inv(lax.reshape(t, size))
    return lax.reshape(inverse, (*t.shape[ind:], *t.shape[:ind]))


def tensorsolve(a: Any, b: Any, axes: Sequence[int] | None = None):
    """``x`` with ``tensordot(a, x, x.ndim) == b``; ``axes`` of ``a`` are moved to the
    end first. ``x`` has shape ``a.shape[b.ndim:]``."""
    t = ensure_array(a)
    rhs = ensure_array(b)
    if axes is not None:
        t = moveaxis(t, tuple(axes), tuple(range(-len(axes), 0)))
    if tuple(t.shape[:rhs.ndim]) != tuple(rhs.shape):
        raise EmberValueError(f"tensorsolve: the leading dimensions of a {tuple(t.shape)} must "
                              f"be b's shape {tuple(rhs.shape)}")
    out_shape = t.shape[rhs.ndim:]
    size = _fold(t.shape, "tensorsolve", rhs.ndim)
    return lax.reshape(solve(lax.reshape(t, size), lax.reshape(rhs, (size[0],))), out_shape)
