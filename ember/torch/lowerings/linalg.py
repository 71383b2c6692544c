"""Lowerings of ATen's linear algebra beyond matrix products (``torch.linalg``:
factorizations, solves, inverses, norms) and of distances.

Conventions that differ between ATen and Ember: ATen's LU pivots are LAPACK's (1-based
int32) where Ember's are 0-based; ATen returns empty tensors for the outputs a flag turns
off (``compute_uv=False``, ``mode="r"``); and the ``*_ex`` ops return LAPACK's ``info``
(0 on success, else the 1-based index of the failing pivot) where Ember gives NaN.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import ember.numpy as jnp
from ember import dtypes
from ember.experimental import io_callback
from ember.lax import linalg as lax_linalg
from ember.scipy import linalg as scipy_linalg
from ember.torch.exchange import numpy_dtype
from ember.torch.lowerings.table import aten, cast, lowers, lowers_effect, reduction_dims
from ember.torch.promotion import promote


# --- shared helpers ---------------------------------------------------------------------

def _is_complex(x: Any) -> bool:
    return dtypes.issubdtype(x.dtype, np.complexfloating)


def _adjoint(a: Any) -> Any:
    """The conjugate transpose of the last two dims."""
    t = jnp.swapaxes(a, -1, -2)
    return jnp.conj(t) if _is_complex(a) else t


def _empty(dtype: np.dtype) -> Any:
    """ATen's placeholder for an output that was not asked for: shape (0,)."""
    return jnp.zeros((0,), dtype)


def _broadcast_batch(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` and ``b`` (stacks of matrices) broadcast to a common batch shape."""
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (jnp.broadcast_to(a, batch + a.shape[-2:]),
            jnp.broadcast_to(b, batch + b.shape[-2:]))


def _first_failure(bad: Any) -> Any:
    """LAPACK's ``info`` from a per-pivot failure mask (..., k): the 1-based index of the
    first failing pivot, or 0."""
    if bad.shape[-1] == 0:
        return jnp.zeros(bad.shape[:-1], np.int32)
    first = cast(jnp.argmax(bad, axis=-1), np.dtype(np.int32)) + 1
    return jnp.where(jnp.any(bad, axis=-1), first, 0).astype(np.int32)


def _lu_factor(a: Any) -> tuple[Any, Any, Any]:
    """Packed LU, ATen's 1-based pivots and ``info`` (the first zero pivot of U)."""
    k = min(a.shape[-2:])
    if k == 0:  # (nothing to factor; Ember's lu rejects matrices with no rows or columns)
        return a, jnp.zeros((*a.shape[:-2], 0), np.int32), jnp.zeros(a.shape[:-2], np.int32)
    packed, pivots, _ = lax_linalg.lu(a)
    diagonal = jnp.diagonal(packed[..., :k, :k], axis1=-2, axis2=-1)
    return packed, pivots + 1, _first_failure(diagonal == 0)


def _permutation(pivots: Any, rows: int) -> Any:
    """Row ``i`` of ``L @ U`` is row ``permutation[i]`` of A, for ATen's 1-based pivots."""
    if pivots.shape[-1] == 0:  # (no swaps; Ember's lu_pivots_to_permutation rejects these)
        return jnp.broadcast_to(jnp.arange(rows, dtype=np.int32), (*pivots.shape[:-1], rows))
    return lax_linalg.lu_pivots_to_permutation(pivots - 1, rows)


def _lu_solve(packed: Any, pivots: Any, b: Any, adjoint: bool) -> Any:
    """Solve ``A X = B`` (``A^H X = B`` if ``adjoint``) with ``A = P L U`` packed."""
    packed, b = _broadcast_batch(packed, b)
    if packed.shape[-1] == 0:  # (a system of no equations: its solution is as empty as B)
        return jnp.zeros(b.shape, b.dtype)
    pivots = jnp.broadcast_to(pivots, packed.shape[:-2] + pivots.shape[-1:])
    permutation = _permutation(pivots, packed.shape[-2])
    if not adjoint:  # L U X = P^T B
        permuted = jnp.take_along_axis(b, permutation[..., None], axis=-2)
        y = lax_linalg.triangular_solve(packed, permuted, left_side=True, lower=True,
                                        unit_diagonal=True)
        return lax_linalg.triangular_solve(packed, y, left_side=True, lower=False)
    # A^H = U^H L^H P^T: solve U^H L^H Z = B, then X = P Z.
    flags = {"left_side": True, "transpose_a": True, "conjugate_a": _is_complex(packed)}
    y = lax_linalg.triangular_solve(packed, b, lower=False, **flags)
    z = lax_linalg.triangular_solve(packed, y, lower=True, unit_diagonal=True, **flags)
    inverse = jnp.argsort(permutation, axis=-1)
    return jnp.take_along_axis(z, inverse[..., None], axis=-2)


def _triangular_solve(a: Any, b: Any, upper: bool, left: bool = True,
                      unitriangular: bool = False, transpose: bool = False) -> Any:
    """Solve ``op(A) X = B`` (``X op(A) = B`` if not ``left``) with only the triangle of A
    named by ``upper`` read; batch dims broadcast."""
    a, b = _broadcast_batch(a, b)
    return lax_linalg.triangular_solve(a, b, left_side=left, lower=not upper,
                                       transpose_a=transpose, unit_diagonal=unitriangular)


# --- norms and distances ----------------------------------------------------------------

def _vector_norm(x: Any, ord: float, axes: tuple[int, ...], keepdim: bool) -> Any:
    """``ord``-norm of ``x`` (real or complex) over ``axes``, real."""
    magnitude = jnp.abs(x)
    if ord == math.inf:
        return jnp.max(magnitude, axis=axes, keepdims=keepdim)
    if ord == -math.inf:
        return jnp.min(magnitude, axis=axes, keepdims=keepdim)
    if ord == 0:
        return jnp.sum((magnitude != 0).astype(magnitude.dtype), axis=axes, keepdims=keepdim)
    if ord == 1:
        return jnp.sum(magnitude, axis=axes, keepdims=keepdim)
    if ord == 2:
        return jnp.sqrt(jnp.sum(magnitude * magnitude, axis=axes, keepdims=keepdim))
    powered = jnp.sum(jnp.power(magnitude, float(ord)), axis=axes, keepdims=keepdim)
    return jnp.power(powered, 1.0 / ord)


@lowers(aten.linalg_vector_norm.default)
def _linalg_vector_norm(x: Any, ord: float = 2, dim: Any = None, keepdim: bool = False, *,
                        dtype: torch.dtype | None = None) -> Any:
    if dtype is not None:  # (ATen casts the input to ``dtype`` before the reduction)
        x = cast(x, numpy_dtype(dtype))
    axes = reduction_dims(dim, x.ndim)
    if dtypes.issubdtype(x.dtype, np.floating) and x.dtype.itemsize < 4:
        # float16 / bfloat16 accumulate in float32, as ATen's reductions do.
        return cast(_vector_norm(cast(x, np.dtype(np.float32)), ord, axes, keepdim), x.dtype)
    return _vector_norm(x, ord, axes, keepdim)


@lowers(aten.dist.default)
def _dist(x: Any, y: Any, p: float = 2) -> Any:
    compute, result = promote(x, y)
    difference = cast(x, compute) - cast(y, compute)
    return cast(_vector_norm(difference, p, tuple(range(difference.ndim)), False), result)


def _pairwise_differences(x1: Any, x2: Any) -> Any:
    """``x1[..., i, :] - x2[..., j, :]`` at ``[..., i, j, :]``."""
    return x1[..., :, None, :] - x2[..., None, :, :]


@lowers(aten._cdist_forward.default)
def _cdist_forward(x1: Any, x2: Any, p: float, compute_mode: int | None = None) -> Any:
    """The p-norm distance of every row of ``x1`` to every row of ``x2``, computed
    directly (ATen's matrix-product shortcut for p = 2 only changes the rounding)."""
    x1, x2 = _broadcast_batch(x1, x2)
    return _vector_norm(_pairwise_differences(x1, x2), p, (-1,), False)


def _distance_gradient(grad: Any, x1: Any, x2: Any, p: float, distance: Any) -> Any:
    """The gradient wrt ``x1`` of the distances ``distance[..., i, j]`` between rows of
    ``x1`` and ``x2``, as ATen's cdist backward: zero where a distance is zero."""
    difference = _pairwise_differences(x1, x2)
    g, d = grad[..., None], distance[..., None]
    zero = jnp.zeros((), difference.dtype)
    if p == 0:
        return jnp.zeros(x1.shape, x1.dtype)
    if p == 1:
        terms = g * jnp.sign(difference)
    elif p == math.inf:
        terms = g * jnp.sign(difference) * (jnp.abs(difference) == d)
    else:
        safe = jnp.where(d == 0, 1, d)
        if p == 2:
            terms = g * difference / safe
        else:
            magnitude = jnp.abs(difference)
            scaled = jnp.sign(difference) * jnp.power(magnitude, p - 1)
            if p < 1:  # (|diff|^(p-1) is infinite at 0; ATen zeroes those terms)
                scaled = jnp.where(magnitude == 0, zero, scaled)
            terms = g * scaled / jnp.power(safe, p - 1)
        terms = jnp.where(d == 0, zero, terms)
    return jnp.sum(terms, axis=-2)


@lowers(aten._cdist_backward.default)
def _cdist_backward(grad: Any, x1: Any, x2: Any, p: float, cdist: Any) -> Any:
    batch = cdist.shape[:-2]
    x1 = jnp.broadcast_to(x1, batch + x1.shape[-2:])
    x2 = jnp.broadcast_to(x2, batch + x2.shape[-2:])
    return _distance_gradient(grad, x1, x2, p, cdist)


def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the pairs ``i < j`` in row-major order (pdist's order)."""
    return np.triu_indices(n, k=1)


@lowers(aten._pdist_forward.default)
def _pdist_forward(x: Any, p: float = 2.0) -> Any:
    rows, cols = _upper_pairs(x.shape[0])
    return _vector_norm(x[rows] - x[cols], p, (-1,), False)


@lowers(aten._pdist_backward.default)
def _pdist_backward(grad: Any, x: Any, p: float, pdist: Any) -> Any:
    """pdist is the upper triangle of cdist(x, x); each pair's gradient reaches both of
    its rows, so it is cdist's backward with the pair gradients placed symmetrically."""
    n = x.shape[0]
    rows, cols = _upper_pairs(n)
    square = jnp.zeros((n, n), grad.dtype).at[rows, cols].set(grad)
    distances = jnp.zeros((n, n), pdist.dtype).at[rows, cols].set(pdist)
    return _distance_gradient(square + square.T, x, x, p, distances + distances.T)


# --- matrix products ----------------------------------------------------------------------

def _scaled_sum(bias: Any, product: Any, beta: Any, alpha: Any) -> Any:
    """``beta * bias + alpha * product``; with ``beta == 0`` the bias is ignored (its
    NaNs too), as ATen."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (bias if beta == 1 else bias * beta)


@lowers(aten.addmv.default)
def _addmv(bias: Any, matrix: Any, vector: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    return _scaled_sum(bias, jnp.matmul(matrix, vector), beta, alpha)


@lowers(aten.addbmm.default)
def _addbmm(bias: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    product = jnp.sum(jnp.matmul(batch1, batch2), axis=0)
    return jnp.broadcast_to(_scaled_sum(bias, product, beta, alpha), product.shape)


@lowers(aten._trilinear.default)
def _trilinear(i1: Any, i2: Any, i3: Any, expand1: Sequence[int], expand2: Sequence[int],
               expand3: Sequence[int], sumdim: Sequence[int], unroll_dim: int = 1) -> Any:
    """Each operand unsqueezed at its ``expand`` dims, multiplied, summed over
    ``sumdim`` (``unroll_dim`` only picks ATen's loop order)."""
    total = i1.ndim + len(expand1)
    operands = [jnp.expand_dims(x, tuple(sorted(d % total for d in expand)))
                if expand else x for x, expand in ((i1, expand1), (i2, expand2), (i3, expand3))]
    product = operands[0] * operands[1] * operands[2]
    return jnp.sum(product, axis=tuple(d % total for d in sumdim))


# --- decompositions -----------------------------------------------------------------------

@lowers(aten._linalg_svd.default)
def _linalg_svd(a: Any, full_matrices: bool = False, compute_uv: bool = True, *,
                driver: str | None = None) -> tuple[Any, Any, Any]:
    if not compute_uv:
        s = lax_linalg.svd(a, compute_uv=False)
        return _empty(a.dtype), s, _empty(a.dtype)
    u, s, vh = lax_linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


@lowers(aten._linalg_eigh.default)
def _linalg_eigh(a: Any, UPLO: str = "L", compute_v: bool = True) -> tuple[Any, Any]:
    """Only the triangle named by ``UPLO`` is read, as LAPACK's syevd."""
    vectors, values = lax_linalg.eigh(a, lower=UPLO == "L", symmetrize_input=False)
    return values, (vectors if compute_v else _empty(a.dtype))


@lowers(aten.linalg_qr.default)
def _linalg_qr(a: Any, mode: str = "reduced") -> tuple[Any, Any]:
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return (_empty(a.dtype) if mode == "r" else q), r


def _lower_cholesky(a: Any, upper: bool) -> tuple[Any, Any]:
    """The lower factor of ``a`` read from the triangle LAPACK's potrf reads, and
    ``info``: the first pivot where ``a`` is not positive definite (a NaN there)."""
    factor = lax_linalg.cholesky(_adjoint(a) if upper else a, symmetrize_input=False)
    info = _first_failure(jnp.isnan(jnp.diagonal(factor, axis1=-2, axis2=-1)))
    return factor, info


@lowers(aten.linalg_cholesky_ex.default)
def _linalg_cholesky_ex(a: Any, *, upper: bool = False,
                        check_errors: bool = False) -> tuple[Any, Any]:
    factor, info = _lower_cholesky(a, upper)
    return (_adjoint(factor) if upper else factor), info


@lowers(aten.cholesky.default)
def _cholesky(a: Any, upper: bool = False) -> Any:
    return _linalg_cholesky_ex(a, upper=upper)[0]


def _cholesky_solve(b: Any, factor: Any, upper: bool) -> Any:
    """Solve ``A X = B`` with ``A = L L^H`` (``U^H U`` if ``upper``) from its factor."""
    factor, b = _broadcast_batch(factor, b)
    conjugate = _is_complex(factor)
    lower = not upper
    # Solve L Y = B then L^H X = Y, or U^H Y = B then U X = Y.
    y = lax_linalg.triangular_solve(factor, b, left_side=True, lower=lower,
                                    transpose_a=upper, conjugate_a=upper and conjugate)
    return lax_linalg.triangular_solve(factor, y, left_side=True, lower=lower,
                                       transpose_a=lower, conjugate_a=lower and conjugate)


@lowers(aten.cholesky_solve.default)
def _cholesky_solve_lowering(b: Any, factor: Any, upper: bool = False) -> Any:
    return _cholesky_solve(b, factor, upper)


@lowers(aten.cholesky_inverse.default)
def _cholesky_inverse(factor: Any, upper: bool = False) -> Any:
    identity = jnp.broadcast_to(jnp.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
    return _cholesky_solve(identity, factor, upper)


@lowers(aten.linalg_lu_factor_ex.default)
def _linalg_lu_factor_ex(a: Any, *, pivot: bool = True,
                         check_errors: bool = False) -> tuple[Any, Any, Any]:
    if not pivot:
        raise NotImplementedError("LU without pivoting is not supported (nor by ATen on CPU)")
    return _lu_factor(a)


def _unpack_lu(packed: Any) -> tuple[Any, Any]:
    """The unit lower factor (m x k) and the upper one (k x n) of a packed LU."""
    m, n = packed.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(packed[..., :, :k], -1) + jnp.eye(m, k, dtype=packed.dtype)
    return lower, jnp.triu(packed[..., :k, :])


def _permutation_matrix(pivots: Any, rows: int, dtype: np.dtype) -> Any:
    """P with ``A = P L U``: a 1 at ``(permutation[i], i)``."""
    permutation = _permutation(pivots, rows)
    one_hot = permutation[..., :, None] == jnp.arange(rows)
    return jnp.swapaxes(one_hot, -1, -2).astype(dtype)


@lowers(aten.lu_unpack.default)
def _lu_unpack(packed: Any, pivots: Any, unpack_data: bool = True,
               unpack_pivots: bool = True) -> tuple[Any, Any, Any]:
    rows = packed.shape[-2]
    p = _permutation_matrix(pivots, rows, packed.dtype) if unpack_pivots \
        else _empty(packed.dtype)
    lower, upper = _unpack_lu(packed) if unpack_data \
        else (_empty(packed.dtype), _empty(packed.dtype))
    return p, lower, upper


@lowers(aten.linalg_lu.default)
def _linalg_lu(a: Any, *, pivot: bool = True) -> tuple[Any, Any, Any]:
    packed, pivots, _ = _linalg_lu_factor_ex(a, pivot=pivot)
    return _lu_unpack(packed, pivots)


@lowers(aten.linalg_lu_solve.default)
def _linalg_lu_solve(packed: Any, pivots: Any, b: Any, *, left: bool = True,
                     adjoint: bool = False) -> Any:
    if left:
        return _lu_solve(packed, pivots, b, adjoint)
    # X A = B is A^H X^H = B^H (and X A^H = B is A X^H = B^H).
    return _adjoint(_lu_solve(packed, pivots, _adjoint(b), not adjoint))


def _determinant_lu(a: Any) -> tuple[Any, Any]:
    """The LU (and pivots) that ATen's det and slogdet return for their backward: of
    ``A^T`` for real ``A`` (ATen's choice for contiguous inputs, as they are in compiled
    graphs; ``det(A^T) = det(A)``), of ``A`` for complex ``A``."""
    packed, pivots, _ = _lu_factor(a if _is_complex(a) else jnp.swapaxes(a, -1, -2))
    return packed, pivots


@lowers(aten._linalg_det.default)
def _linalg_det(a: Any) -> tuple[Any, Any, Any]:
    packed, pivots = _determinant_lu(a)
    sign = _pivot_sign(pivots, a.dtype)
    diagonal = jnp.diagonal(packed, axis1=-2, axis2=-1)
    return sign * jnp.prod(diagonal, axis=-1), packed, pivots


def _pivot_sign(pivots: Any, dtype: np.dtype) -> Any:
    """The permutation's determinant: -1 per row swap."""
    swaps = jnp.sum(pivots != jnp.arange(1, pivots.shape[-1] + 1, dtype=pivots.dtype),
                    axis=-1)
    return jnp.where(swaps % 2 == 0, 1, -1).astype(dtype)


@lowers(aten._linalg_slogdet.default)
def _linalg_slogdet(a: Any) -> tuple[Any, Any, Any, Any]:
    packed, pivots = _determinant_lu(a)
    diagonal = jnp.diagonal(packed, axis1=-2, axis2=-1)
    magnitude = jnp.abs(diagonal)
    if _is_complex(a):
        phases = jnp.where(magnitude == 0, 0, diagonal / jnp.where(magnitude == 0, 1, magnitude))
    else:
        phases = jnp.sign(diagonal)
    sign = _pivot_sign(pivots, a.dtype) * jnp.prod(phases, axis=-1)
    return sign, jnp.sum(jnp.log(magnitude), axis=-1), packed, pivots


@lowers(aten.linalg_inv_ex.default)
def _linalg_inv_ex(a: Any, *, check_errors: bool = False) -> tuple[Any, Any]:
    packed, pivots, info = _lu_factor(a)
    identity = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return _lu_solve(packed, pivots, identity, adjoint=False), info


def _is_vector_rhs(a: Any, b: Any) -> bool:
    """ATen's rule: ``B`` is a (batch of) vector(s) if 1-D or of shape ``A.shape[:-1]``."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))


@lowers(aten._linalg_solve_ex.default)
def _linalg_solve_ex(a: Any, b: Any, *, left: bool = True,
                     check_errors: bool = False) -> tuple[Any, Any, Any, Any]:
    """The solution, and the LU of ``A`` its backward reuses."""
    compute, _ = promote(a, b)
    a, b = cast(a, compute), cast(b, compute)
    packed, pivots, info = _lu_factor(a)
    vector = _is_vector_rhs(a, b)
    rhs = b[..., None] if vector else b
    x = _linalg_lu_solve(packed, pivots, rhs, left=left)
    return (x[..., 0] if vector else x), packed, pivots, info


@lowers(aten.linalg_solve_triangular.default)
def _linalg_solve_triangular(a: Any, b: Any, *, upper: bool, left: bool = True,
                             unitriangular: bool = False) -> Any:
    return _triangular_solve(a, b, upper, left=left, unitriangular=unitriangular)


@lowers(aten.triangular_solve.default)
def _triangular_solve_lowering(b: Any, a: Any, upper: bool = True, transpose: bool = False,
                               unitriangular: bool = False) -> tuple[Any, Any]:
    """The solution and ``A`` broadcast to the batch shape (ATen's "cloned coefficient")."""
    a, b = _broadcast_batch(a, b)
    solution = _triangular_solve(a, b, upper, unitriangular=unitriangular, transpose=transpose)
    return solution, a


@lowers(aten.linalg_matrix_exp.default)
def _linalg_matrix_exp(a: Any) -> Any:
    """Scaling and squaring with a Pade approximant (ATen: Bader-Blanes-Casas Taylor
    polynomials). Both are accurate normwise, but a float32 element that cancellation
    leaves much smaller than its row carries an error of about eps times the row: there
    each differs from the exact value, and from the other, far beyond eps relative."""
    return scipy_linalg.expm(a)


# --- pseudo-inverse -----------------------------------------------------------------------

def _pinv(a: Any, atol: Any, rtol: Any, hermitian: bool) -> Any:
    """ATen's pseudo-inverse: singular values (eigenvalue magnitudes if ``hermitian``)
    above ``max(atol, rtol * largest)`` are inverted, the rest dropped. Without either
    tolerance ``rtol`` is ``eps * max(m, n)``; with only ``atol > 0`` it is 0."""
    real = np.dtype(jnp.finfo(a.dtype).dtype)
    default_rtol = jnp.finfo(real).eps * max(a.shape[-2:])
    atol = jnp.zeros((), real) if atol is None else cast(atol, real)
    if rtol is None:
        rtol = jnp.where(atol > 0, 0, default_rtol).astype(real)
    rtol = cast(rtol, real)
    if hermitian:
        vectors, values = lax_linalg.eigh(a, symmetrize_input=False)
        magnitude = jnp.abs(values)
        largest = jnp.max(magnitude, axis=-1, keepdims=True, initial=0)  # (0 x 0 matrices)
        tolerance = jnp.maximum(atol[..., None], rtol[..., None] * largest)
        inverse = jnp.where(magnitude > tolerance, 1 / jnp.where(values == 0, 1, values), 0)
        return jnp.matmul(vectors * inverse[..., None, :].astype(a.dtype), _adjoint(vectors))
    u, s, vh = lax_linalg.svd(a, full_matrices=False)
    largest = s[..., :1]
    tolerance = jnp.maximum(atol[..., None], rtol[..., None] * largest)
    inverse = jnp.where(s > tolerance, 1 / jnp.where(s == 0, 1, s), 0)
    return jnp.matmul(_adjoint(vh) * inverse[..., None, :].astype(a.dtype), _adjoint(u))


@lowers(aten.linalg_pinv.atol_rtol_tensor, aten.linalg_pinv.atol_rtol_float)
def _linalg_pinv(a: Any, *, atol: Any = None, rtol: Any = None,
                 hermitian: bool = False) -> Any:
    return _pinv(a, atol, rtol, hermitian)


@lowers(aten.linalg_pinv.default, aten.linalg_pinv.rcond_tensor)
def _linalg_pinv_rcond(a: Any, rcond: Any, hermitian: bool = False) -> Any:
    """The legacy form: ``rcond`` is ``rtol`` with no absolute tolerance."""
    return _pinv(a, 0.0, rcond, hermitian)


# --- Householder reflectors (LAPACK's geqrf / orgqr / ormqr) --------------------------------

def _reflector(a: Any, i: int) -> Any:
    """The Householder vector ``v_i`` stored in column ``i`` of ``a`` (..., m, k): zero
    above row ``i``, 1 at row ``i``, ``a``'s entries below."""
    rows = jnp.arange(a.shape[-2])
    below = jnp.where(rows > i, a[..., :, i], jnp.zeros((), a.dtype))
    return jnp.where(rows == i, jnp.ones((), a.dtype), below)


def _reflect(c: Any, v: Any, tau: Any, left: bool) -> Any:
    """``H c`` (``c H`` if not ``left``) with ``H = I - tau v v^H``."""
    tau = tau[..., None, None]
    if left:
        w = jnp.sum(jnp.conj(v)[..., :, None] * c, axis=-2)  # v^H c
        return c - tau * v[..., :, None] * w[..., None, :]
    w = jnp.sum(c * v[..., None, :], axis=-1)  # c v
    return c - tau * w[..., :, None] * jnp.conj(v)[..., None, :]


def _apply_reflectors(a: Any, tau: Any, c: Any, left: bool, adjoint: bool) -> Any:
    """``op(Q) c`` (``c op(Q)`` if not ``left``) with ``Q = H_0 H_1 ... H_{k-1}`` from
    the reflectors in ``a`` and ``tau``, ``op`` the conjugate transpose if ``adjoint``."""
    k = tau.shape[-1]
    # Q c applies H_{k-1} first; Q^H c applies H_0^H first; c Q applies H_0 first.
    order = range(k) if left == adjoint else range(k - 1, -1, -1)
    for i in order:
        t = tau[..., i]
        c = _reflect(c, _reflector(a, i), jnp.conj(t) if adjoint else t, left)
    return c


@lowers(aten.linalg_householder_product.default)
def _linalg_householder_product(a: Any, tau: Any) -> Any:
    """The first n columns of ``Q = H_0 ... H_{k-1}`` (LAPACK's orgqr)."""
    m, n = a.shape[-2:]
    identity = jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape[:-2] + (m, n))
    return _apply_reflectors(a, tau, identity, left=True, adjoint=False)


@lowers(aten.ormqr.default)
def _ormqr(a: Any, tau: Any, c: Any, left: bool = True, transpose: bool = False) -> Any:
    """``op(Q) C`` or ``C op(Q)`` for the full square Q of the reflectors (``op`` the
    conjugate transpose if ``transpose``)."""
    return _apply_reflectors(a, tau, c, left=left, adjoint=transpose)


@lowers(aten.geqrf.default)
def _geqrf(a: Any) -> tuple[Any, Any]:
    """Unblocked Householder QR as LAPACK's geqr2 / larfg: R on and above the diagonal,
    the reflectors below it, and their ``tau``."""
    m, n = a.shape[-2:]
    taus = []
    zero = jnp.zeros((), a.dtype)
    for j in range(min(m, n)):
        alpha, tail = a[..., j, j], a[..., j + 1:, j]
        tail_norm = jnp.sqrt(jnp.sum(jnp.abs(tail) ** 2, axis=-1))
        real_alpha = jnp.real(alpha)
        norm = jnp.sqrt(jnp.abs(alpha) ** 2 + tail_norm ** 2)
        beta = -jnp.where(real_alpha < 0, -norm, norm)  # -sign(Re alpha) * norm
        # No reflection is needed when the column is already reduced (LAPACK's tau = 0).
        trivial = (tail_norm == 0) & (jnp.imag(alpha) == 0)
        safe_beta = jnp.where(trivial, 1, beta)
        tau = jnp.where(trivial, zero, ((beta - alpha) / safe_beta).astype(a.dtype))
        scale = jnp.where(trivial, 1, 1 / jnp.where(trivial, 1, alpha - beta))
        a = a.at[..., j + 1:, j].set((tail * scale[..., None]).astype(a.dtype))
        a = a.at[..., j, j].set(jnp.where(trivial, alpha, beta.astype(a.dtype)))
        if j + 1 < n:  # (geqr2 applies H_j^H to the columns to the right)
            v = _reflector(a[..., j:, j:j + 1], 0)
            a = a.at[..., j:, j + 1:].set(_reflect(a[..., j:, j + 1:], v, jnp.conj(tau), True))
        taus.append(tau)
    tau = jnp.stack(taus, axis=-1) if taus else jnp.zeros((*a.shape[:-2], 0), a.dtype)
    return a, tau


@lowers(aten.linalg_eig.default)
def _linalg_eig(a: Any) -> tuple[Any, Any]:
    """Complex eigenvalues and unit right eigenvectors, from LAPACK's geev as ATen's."""
    values, vectors = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return values, vectors


# --- LDL^T with Bunch-Kaufman pivoting (LAPACK's sytf2 / sytrs, lower storage) ------------
#
# Each step takes a 1x1 or a 2x2 pivot block, chosen from the data, so each matrix of a
# batch has its own steps: every position k is unrolled and the matrices for which k is
# the second row of a 2x2 block skip it. Both block sizes are computed; masks select.

_BUNCH_KAUFMAN_ALPHA = (1 + math.sqrt(17)) / 8


def _row(x: Any, index: Any) -> Any:
    """``x[b, index[b], :]`` for a batch (B, n, m) and per-matrix row indices (B,)."""
    return jnp.take_along_axis(x, index[:, None, None], axis=1)[:, 0, :]


def _swap_rows(x: Any, i: Any, j: Any, first: int = 0) -> Any:
    """``x`` (B, n, m) with rows ``i[b]`` and ``j[b]`` swapped, columns from ``first`` on."""
    rows = jnp.arange(x.shape[1])[None, :]
    order = jnp.where(rows == i[:, None], j[:, None], jnp.where(rows == j[:, None],
                                                                  i[:, None], rows))
    swapped = jnp.take_along_axis(x, order[:, :, None], axis=1)
    return jnp.where(jnp.arange(x.shape[2]) >= first, swapped, x)


def _bunch_kaufman_pivot(a: Any, k: int) -> tuple[Any, Any, Any]:
    """Column k's pivot (B,): the row ``kp`` to bring to the block, whether the block is
    2x2, and whether column k is all zero (no pivot: LAPACK's info)."""
    absakk = jnp.abs(a[:, k, k])
    if k + 1 == a.shape[1]:
        return jnp.full(absakk.shape, k), jnp.zeros(absakk.shape, bool), absakk == 0
    column = jnp.abs(a[:, k + 1:, k])
    imax = (k + 1 + jnp.argmax(column, axis=-1)).astype(np.int32)
    colmax = jnp.max(column, axis=-1)
    columns = jnp.arange(a.shape[2])
    in_row = (columns >= k) & (columns != imax[:, None])
    rowmax = jnp.max(jnp.where(in_row, jnp.abs(_row(a, imax)), 0), axis=-1)
    diagonal_imax = jnp.abs(jnp.take_along_axis(_row(a, imax), imax[:, None], axis=1)[:, 0])
    safe_rowmax = jnp.where(rowmax == 0, 1, rowmax)
    keep_k = (absakk >= _BUNCH_KAUFMAN_ALPHA * colmax) \
        | (absakk >= _BUNCH_KAUFMAN_ALPHA * colmax * (colmax / safe_rowmax))
    zero = jnp.maximum(absakk, colmax) == 0
    keep_k = keep_k | zero
    two = ~keep_k & (diagonal_imax < _BUNCH_KAUFMAN_ALPHA * rowmax)
    return jnp.where(keep_k, k, imax).astype(np.int32), two, zero


def _ldl_step(a: Any, k: int, kp: Any, two: Any, zero: Any) -> Any:
    """Swap ``kp`` into the pivot block at k (in the trailing submatrix only, as LAPACK)
    and eliminate below it with a 1x1 or 2x2 pivot."""
    n = a.shape[1]
    last = k + two.astype(np.int32)  # (the block's last row takes the pivot row)
    a = _swap_rows(a, last, kp, first=k)
    a = jnp.swapaxes(_swap_rows(jnp.swapaxes(a, 1, 2), last, kp, first=k), 1, 2)
    rows = jnp.arange(n)
    # 1x1: A22 -= x x^T / d and the column becomes x / d.
    d = jnp.where(zero, 1, a[:, k, k])
    x = jnp.where(rows > k, a[:, :, k], 0)
    one = a - jnp.where(rows[:, None] > k, x[:, :, None] * x[:, None, :] / d[:, None, None], 0)
    one = one.at[:, :, k].set(jnp.where(rows > k, x / d[:, None], a[:, :, k]))
    one = jnp.where(zero[:, None, None], a, one)
    if k + 1 == n:
        return one
    # 2x2 (as sytf2): W = X D^-1 for the rows below the block, A22 -= X D^-1 X^T.
    d21 = jnp.where(two, a[:, k + 1, k], 1)
    d11, d22 = a[:, k + 1, k + 1] / d21, a[:, k, k] / d21
    t = 1 / (d11 * d22 - 1)
    scale = (t / d21)[:, None]
    below = rows > k + 1
    xk, xk1 = jnp.where(below, a[:, :, k], 0), jnp.where(below, a[:, :, k + 1], 0)
    wk = scale * (d11[:, None] * xk - xk1)
    wk1 = scale * (d22[:, None] * xk1 - xk)
    update = xk[:, :, None] * wk[:, None, :] + xk1[:, :, None] * wk1[:, None, :]
    block = a - update
    block = block.at[:, :, k].set(jnp.where(below, wk, a[:, :, k]))
    block = block.at[:, :, k + 1].set(jnp.where(below, wk1, a[:, :, k + 1]))
    return jnp.where(two[:, None, None], block, one)


@lowers(aten.linalg_ldl_factor_ex.default)
def _linalg_ldl_factor_ex(a: Any, *, hermitian: bool = False,
                          check_errors: bool = False) -> tuple[Any, Any, Any]:
    """LAPACK's sytrf on the lower triangle: L and D packed in the lower triangle (the
    upper zeroed, as ATen), 1-based pivots, negative for both rows of a 2x2 block."""
    if _is_complex(a):
        raise NotImplementedError("LDL of complex matrices is not supported")
    batch, n = a.shape[:-2], a.shape[-1]
    lower = jnp.tril(jnp.reshape(a, (math.prod(batch), n, n)))
    work = lower + jnp.swapaxes(jnp.tril(lower, -1), 1, 2)  # the symmetric matrix read
    pivots = jnp.zeros(work.shape[:2], np.int32)
    info = jnp.zeros(work.shape[:1], np.int32)
    skip = jnp.zeros(work.shape[:1], bool)
    for k in range(n):
        kp, two, zero = _bunch_kaufman_pivot(work, k)
        stepped = _ldl_step(work, k, kp, two, zero)
        work = jnp.where(skip[:, None, None], work, stepped)
        code = jnp.where(two, -(kp + 1), kp + 1).astype(np.int32)
        pivots = pivots.at[:, k].set(jnp.where(skip, pivots[:, k], code))
        if k + 1 < n:
            pivots = pivots.at[:, k + 1].set(jnp.where(~skip & two, code, pivots[:, k + 1]))
        info = jnp.where(~skip & zero & (info == 0), k + 1, info).astype(np.int32)
        skip = ~skip & two
    return (jnp.reshape(jnp.tril(work), a.shape), jnp.reshape(pivots, (*batch, n)),
            jnp.reshape(info, batch))


def _ldl_solve_forward(ld: Any, pivots: Any, b: Any) -> Any:
    """Solve ``P L D Y = B`` (sytrs's first half), block by block from the top."""
    n = ld.shape[1]
    rows = jnp.arange(n)[None, :, None]
    skip = jnp.zeros(pivots.shape[:1], bool)
    for k in range(n):
        two = pivots[:, k] < 0
        # 1x1: swap k with its pivot row, eliminate below, divide by D(k, k).
        one = _swap_rows(b, jnp.full(two.shape, k), jnp.abs(pivots[:, k]) - 1)
        one = one - jnp.where(rows > k, ld[:, :, k:k + 1] * one[:, k:k + 1, :], 0)
        one = one.at[:, k, :].divide(jnp.where(two, 1, ld[:, k, k])[:, None])
        if k + 1 < n:
            # 2x2: swap k + 1 with the pivot row, eliminate below, solve the 2x2 block.
            block = _swap_rows(b, jnp.full(two.shape, k + 1), -pivots[:, k] - 1)
            block = block - jnp.where(rows > k + 1, ld[:, :, k:k + 1] * block[:, k:k + 1, :]
                                      + ld[:, :, k + 1:k + 2] * block[:, k + 1:k + 2, :], 0)
            akm1k = jnp.where(two, ld[:, k + 1, k], 1)[:, None]
            akm1, ak = ld[:, k, k][:, None] / akm1k, ld[:, k + 1, k + 1][:, None] / akm1k
            denominator = akm1 * ak - 1
            bkm1, bk = block[:, k, :] / akm1k, block[:, k + 1, :] / akm1k
            block = block.at[:, k, :].set((ak * bkm1 - bk) / denominator)
            block = block.at[:, k + 1, :].set((akm1 * bk - bkm1) / denominator)
            one = jnp.where(two[:, None, None], block, one)
        b = jnp.where(skip[:, None, None], b, one)
        skip = ~skip & two
    return b


def _ldl_solve_backward(ld: Any, pivots: Any, b: Any) -> Any:
    """Solve ``L^T P^T X = Y`` (sytrs's second half), block by block from the bottom."""
    n = ld.shape[1]
    below = jnp.arange(n)[None, :, None]
    skip = jnp.zeros(pivots.shape[:1], bool)
    for k in range(n - 1, -1, -1):
        two = pivots[:, k] < 0
        tail = jnp.where(below > k, b, 0)
        # (a 2x2 block's rows k - 1 and k both take the rows below it off)
        update = b.at[:, k, :].add(-jnp.sum(ld[:, :, k:k + 1] * tail, axis=1))
        if k > 0:
            second = update.at[:, k - 1, :].add(-jnp.sum(ld[:, :, k - 1:k] * tail, axis=1))
            update = jnp.where(two[:, None, None], second, update)
        swapped = _swap_rows(update, jnp.full(two.shape, k), jnp.abs(pivots[:, k]) - 1)
        b = jnp.where(skip[:, None, None], b, swapped)
        skip = ~skip & two
    return b


@lowers(aten.linalg_ldl_solve.default)
def _linalg_ldl_solve(ld: Any, pivots: Any, b: Any, *, hermitian: bool = False) -> Any:
    """Solve ``A X = B`` from ``linalg_ldl_factor_ex``'s factorization of A."""
    if _is_complex(ld):
        raise NotImplementedError("LDL of complex matrices is not supported")
    ld, b = _broadcast_batch(ld, b)
    pivots = jnp.broadcast_to(pivots, ld.shape[:-1])
    count, n, columns = math.prod(ld.shape[:-2]), ld.shape[-1], b.shape[-1]
    flat_ld = jnp.reshape(ld, (count, n, n))
    flat_pivots = jnp.reshape(pivots, (count, n))
    y = _ldl_solve_forward(flat_ld, flat_pivots, jnp.reshape(b, (count, n, columns)))
    return jnp.reshape(_ldl_solve_backward(flat_ld, flat_pivots, y), b.shape)


# --- error checks of the non-``_ex`` ops --------------------------------------------------

def _raise_on_failure(info: np.ndarray, api_name: str, is_matrix: bool) -> None:
    """ATen's own check, run on the host when the program runs: it raises ATen's error
    (singular matrix, not positive definite, ...) for a nonzero ``info``."""
    torch.ops.aten._linalg_check_errors(torch.from_numpy(np.array(info)), api_name,
                                        is_matrix=is_matrix)


@lowers_effect(aten._linalg_check_errors.default)
def _check_errors(info: Any, api_name: str, *, is_matrix: bool) -> tuple[()]:
    """``torch.linalg.inv`` and the other non-``_ex`` ops check their ``info`` through an
    effect; the check runs as an ordered host callback."""
    io_callback(functools.partial(_raise_on_failure, api_name=api_name, is_matrix=is_matrix),
                (), info, ordered=True)
    return ()
