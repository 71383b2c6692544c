"""Matrix decompositions and triangular solves (``ember.lax.linalg``, as ``jax.lax.linalg``).

Every primitive works on the trailing two dimensions and maps over any leading ones.
The references use ``numpy.linalg`` where it has the routine, and short vectorized
loops for LU with partial pivoting and triangular substitution, which it lacks. As in
XLA, failures give NaN instead of raising: a matrix that is not positive definite has
a NaN Cholesky factor.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import elementwise as ew
from ember.ops.linalg import batch_matmul
from ember.ops.reductions import reduce_sum
from ember.ops.structural import broadcast_in_dim, broadcasted_iota, transpose
from ember.ops.rules import (
    Zero, batch_size, defjvp2, defjvp_zero, is_undefined_primal, move_batch_axis)

__all__ = ["cholesky", "lu", "lu_pivots_to_permutation", "triangular_solve", "qr", "eigh",
           "eig", "svd"]


def _check_matrix(name: str, x: ShapedArray, square: bool = True) -> None:
    if not dtypes.is_inexact(x.dtype):
        raise EmberTypeError(f"{name} needs a floating or complex operand, got {x.dtype} "
                             "(convert with .astype(float))")
    if x.ndim < 2:
        raise EmberValueError(f"{name} needs a matrix (or a stack of them), got shape "
                              f"{x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise EmberValueError(f"{name} needs square matrices, got shape {x.shape}")


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.real(np.zeros((), dtype)).dtype


def _swap_last(x: Any) -> Any:
    return transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _adjoint(x: Any) -> Any:
    xt = _swap_last(x)
    return ew.conj(xt) if dtypes.is_complex(x.dtype) else xt


def _hermitian_part(x: Any) -> Any:
    """``(x + x^H) / 2``: what the symmetric decompositions see when symmetrizing."""
    return ew.mul(ew.add(x, _adjoint(x)), 0.5)


# --- cholesky ------------------------------------------------------------------------

cholesky_p = Primitive("cholesky")


@cholesky_p.def_abstract_eval
def _cholesky_abstract(x: ShapedArray) -> ShapedArray:
    _check_matrix("cholesky", x)
    return x


def _per_matrix(fn, x: np.ndarray, nan_on: type[Exception]) -> np.ndarray:
    """Apply ``fn`` to each matrix of a stack; a matrix where it raises becomes NaN."""
    flat = x.reshape(-1, *x.shape[-2:])
    out = np.empty_like(flat)
    for i, matrix in enumerate(flat):
        try:
            out[i] = fn(matrix)
        except nan_on:
            out[i] = np.nan
    return out.reshape(x.shape)


@cholesky_p.def_impl
def _cholesky_impl(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    try:  # the whole stack at once; one failing matrix makes NumPy reject all of them
        return np.linalg.cholesky(x)
    except np.linalg.LinAlgError:
        return _per_matrix(np.linalg.cholesky, x, np.linalg.LinAlgError)


def cholesky(x: Any, *, symmetrize_input: bool = True) -> Any:
    """Lower Cholesky factor ``L`` with ``x = L @ L^H``; NaN where ``x`` is not positive
    definite. Only the lower triangle is read unless ``symmetrize_input``."""
    if symmetrize_input:
        x = _hermitian_part(x)
    return cholesky_p.bind(x)


# --- LU ----------------------------------------------------------------------------------

lu_p = Primitive("lu", multiple_results=True)


@lu_p.def_abstract_eval
def _lu_abstract(x: ShapedArray) -> list[ShapedArray]:
    _check_matrix("lu", x, square=False)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    return [x, ShapedArray((*batch, min(m, n)), dtypes.int32),
            ShapedArray((*batch, m), dtypes.int32)]


def _lu_in_place(a: np.ndarray, pivots: np.ndarray, perm: np.ndarray) -> None:
    """Partial-pivoting LU of a stack ``a`` (B, m, n), as LAPACK's getrf (zero pivots are
    left in place, not divided by)."""
    rows = np.arange(a.shape[0])
    for j in range(min(a.shape[1:])):
        p = j + np.argmax(np.abs(a[:, j:, j]), axis=1)
        pivots[:, j] = p
        a[rows, j], a[rows, p] = a[rows, p], a[rows, j].copy()
        perm[rows, j], perm[rows, p] = perm[rows, p], perm[rows, j].copy()
        pivot = a[:, j, j]
        safe = np.where(pivot == 0, 1, pivot)
        a[:, j + 1:, j] /= safe[:, None]
        a[:, j + 1:, j + 1:] -= a[:, j + 1:, j, None] * a[:, j, None, j + 1:]


@lu_p.def_impl
def _lu_impl(x: np.ndarray) -> list[np.ndarray]:
    x = np.asarray(x)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    a = x.reshape(math.prod(batch), m, n).copy()  # (not -1: ambiguous for an empty matrix)
    pivots = np.zeros((a.shape[0], min(m, n)), np.int32)
    perm = np.tile(np.arange(m, dtype=np.int32), (a.shape[0], 1))
    with np.errstate(all="ignore"):
        _lu_in_place(a, pivots, perm)
    return [a.reshape(x.shape), pivots.reshape(*batch, min(m, n)), perm.reshape(*batch, m)]


def lu(x: Any) -> tuple[Any, Any, Any]:
    """LU decomposition with partial pivoting: ``(lu, pivots, permutation)``.

    ``lu`` holds unit-lower ``L`` below the diagonal and ``U`` on and above it, with
    ``x[permutation] = L @ U``; ``pivots[i]`` is the row swapped with row ``i``.
    """
    return tuple(lu_p.bind(x))


# --- triangular solve ---------------------------------------------------------------------

triangular_solve_p = Primitive("triangular_solve")


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract(a: ShapedArray, b: ShapedArray, *, left_side: bool,
                               lower: bool, transpose_a: bool, conjugate_a: bool,
                               unit_diagonal: bool) -> ShapedArray:
    _check_matrix("triangular_solve", a)
    if b.ndim < 2 or b.dtype != a.dtype:
        raise EmberTypeError(f"triangular_solve: b must be a matrix of a's dtype {a.dtype}, "
                             f"got {b.dtype}{list(b.shape)}")
    m = a.shape[-1]
    solved = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[:-2] != b.shape[:-2] or solved != m:
        side = "b.shape[-2]" if left_side else "b.shape[-1]"
        raise EmberValueError(f"triangular_solve: a {a.shape} and b {b.shape} need equal "
                              f"batch dimensions and {side} == {m} (left_side={left_side})")
    return b


def _forward_substitution(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve ``t @ x = b`` for lower-triangular ``t`` (..., m, m), ``b`` (..., m, n)."""
    x = np.zeros(np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                 np.result_type(t, b))
    for i in range(t.shape[-1]):
        partial = np.einsum("...k,...kn->...n", t[..., i, :i], x[..., :i, :])
        x[..., i, :] = (b[..., i, :] - partial) / t[..., i, i, None]
    return x


@triangular_solve_p.def_impl
def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a,
                           unit_diagonal):
    a, b = np.asarray(a), np.asarray(b)
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        m = a.shape[-1]
        t = np.where(np.eye(m, dtype=bool), np.ones((), a.dtype), t)
    if conjugate_a:
        t = np.conj(t)
    if transpose_a:
        t, lower = np.swapaxes(t, -1, -2), not lower
    if not left_side:  # x @ t = b  <=>  t^T @ x^T = b^T
        t, b, lower = np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2), not lower
    if not lower:  # reversing rows and columns makes an upper triangle lower
        t, b = t[..., ::-1, ::-1], b[..., ::-1, :]
    with np.errstate(all="ignore"):
        x = _forward_substitution(t, b)
    if not lower:
        x = x[..., ::-1, :]
    return np.swapaxes(x, -1, -2) if not left_side else x


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Any:
    """Solve ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular ``a``.

    ``op`` transposes and/or conjugates ``a`` as asked; only the ``lower`` (or upper)
    triangle of ``a`` is read, and its diagonal is taken as ones if ``unit_diagonal``.
    """
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a),
                                   conjugate_a=bool(conjugate_a),
                                   unit_diagonal=bool(unit_diagonal))


# --- QR ------------------------------------------------------------------------------------

qr_p = Primitive("qr", multiple_results=True)


@qr_p.def_abstract_eval
def _qr_abstract(x: ShapedArray, *, full_matrices: bool) -> list[ShapedArray]:
    _check_matrix("qr", x, square=False)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    k = m if full_matrices else min(m, n)
    return [ShapedArray((*batch, m, k), x.dtype), ShapedArray((*batch, k, n), x.dtype)]


@qr_p.def_impl
def _qr_impl(x: np.ndarray, *, full_matrices: bool) -> list[np.ndarray]:
    x = np.asarray(x)
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q.astype(x.dtype), r.astype(x.dtype)]


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True) -> tuple[Any, Any]:
    """QR decomposition ``x = q @ r`` (``q`` with orthonormal columns, ``r`` upper
    triangular); ``full_matrices=False`` gives the reduced factors."""
    if pivoting:
        raise EmberValueError("qr: pivoting=True is not supported")
    return tuple(qr_p.bind(x, full_matrices=bool(full_matrices)))


# --- eigh ----------------------------------------------------------------------------------

eigh_p = Primitive("eigh", multiple_results=True)


@eigh_p.def_abstract_eval
def _eigh_abstract(x: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    _check_matrix("eigh", x)
    return [x, ShapedArray(x.shape[:-1], _real_dtype(x.dtype))]


@eigh_p.def_impl
def _eigh_impl(x: np.ndarray, *, lower: bool) -> list[np.ndarray]:
    x = np.asarray(x)
    try:
        w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
    except np.linalg.LinAlgError:  # non-finite input
        w, v = np.full(x.shape[:-1], np.nan), np.full(x.shape, np.nan)
    return [v.astype(x.dtype), w.astype(_real_dtype(x.dtype))]


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True, subset_by_index: Any = None) -> tuple[Any, Any]:
    """Eigendecomposition of Hermitian matrices: ``(v, w)`` with ``x @ v = v * w``,
    eigenvalues ``w`` ascending and eigenvectors in the columns of ``v``."""
    if subset_by_index is not None:
        raise EmberValueError("eigh: subset_by_index is not supported")
    if not sort_eigenvalues:
        raise EmberValueError("eigh: eigenvalues are always sorted; sort_eigenvalues=False "
                              "is not supported")
    if symmetrize_input:
        x = _hermitian_part(x)
    return tuple(eigh_p.bind(x, lower=bool(lower)))


# --- eig (general matrices) ---------------------------------------------------------------

eig_p = Primitive("eig", multiple_results=True)


def _complex_dtype(dtype: np.dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


@eig_p.def_abstract_eval
def _eig_abstract(x: ShapedArray, *, compute_left_eigenvectors: bool,
                  compute_right_eigenvectors: bool) -> list[ShapedArray]:
    _check_matrix("eig", x)
    complex_dtype = _complex_dtype(x.dtype)
    vectors = [ShapedArray(x.shape, complex_dtype)] * (
        int(compute_left_eigenvectors) + int(compute_right_eigenvectors))
    return [ShapedArray(x.shape[:-1], complex_dtype), *vectors]


def _geev(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and unit right eigenvectors from LAPACK's geev at the input's precision
    where NumPy has it: float32 through sgeev, as LAPACK (ATen, JAX) computes it.
    np.linalg.eig would compute in double, and a real eigenvector's sign (which geev
    leaves as the iteration made it) then often differs from sgeev's."""
    if x.dtype == np.float32 and np.isfinite(x).all():  # (np.linalg.eig rejects the rest)
        try:
            from numpy.linalg import _umath_linalg  # (np.linalg.eig's own gufunc)

            with np.errstate(all="ignore"):
                w, vr = _umath_linalg.eig(x, signature="f->FF")
        except (ImportError, AttributeError, TypeError):  # (a NumPy without it)
            return np.linalg.eig(x)
        if not (np.isfinite(w).all() and np.isfinite(vr).all()):
            raise np.linalg.LinAlgError("eig did not converge")  # (as np.linalg.eig)
        return w, vr
    return np.linalg.eig(x)  # (real arrays when every eigenvalue is real)


@eig_p.def_impl
def _eig_impl(x: np.ndarray, *, compute_left_eigenvectors: bool,
              compute_right_eigenvectors: bool) -> list[np.ndarray]:
    x = np.asarray(x)
    complex_dtype = _complex_dtype(x.dtype)
    try:
        w, vr = _geev(x)
        vl = None
        if compute_left_eigenvectors:
            # rows of inv(vr) are the left eigenvectors' conjugates; unit columns (LAPACK)
            vl = np.conj(np.swapaxes(np.linalg.inv(vr.astype(np.complex128)), -1, -2))
            vl = vl / np.linalg.norm(vl, axis=-2, keepdims=True)
    except np.linalg.LinAlgError:  # non-finite or defective input
        w = np.full(x.shape[:-1], np.nan, complex_dtype)
        vr = vl = np.full(x.shape, np.nan, complex_dtype)
    outputs = [w.astype(complex_dtype)]
    if compute_left_eigenvectors:
        outputs.append(vl.astype(complex_dtype))
    if compute_right_eigenvectors:
        outputs.append(vr.astype(complex_dtype))
    return outputs


def eig(x: Any, *, compute_left_eigenvectors: bool = True,
        compute_right_eigenvectors: bool = True) -> list[Any]:
    """Eigendecomposition of general square matrices, as ``jax.lax.linalg.eig``:
    ``[w, vl, vr]`` (complex; the vectors as asked) with ``x @ vr = vr * w`` and
    ``vl^H x = w vl^H``, eigenvectors in unit-norm columns, in no particular order.
    Runs on the host on every backend; not differentiable."""
    return list(eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                           compute_right_eigenvectors=bool(compute_right_eigenvectors)))


# --- SVD -----------------------------------------------------------------------------------

svd_p = Primitive("svd", multiple_results=True)


@svd_p.def_abstract_eval
def _svd_abstract(x: ShapedArray, *, full_matrices: bool, compute_uv: bool) -> list:
    _check_matrix("svd", x, square=False)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    k = min(m, n)
    s = ShapedArray((*batch, k), _real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    rows, cols = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray((*batch, m, rows), x.dtype), ShapedArray((*batch, cols, n), x.dtype)]


@svd_p.def_impl
def _svd_impl(x: np.ndarray, *, full_matrices: bool, compute_uv: bool) -> list:
    x = np.asarray(x)
    out_avals = _svd_abstract(ShapedArray(x.shape, x.dtype), full_matrices=full_matrices,
                              compute_uv=compute_uv)
    try:
        if not compute_uv:
            return [np.linalg.svd(x, compute_uv=False).astype(out_avals[0].dtype)]
        u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
        outs = [s, u, vh]
    except np.linalg.LinAlgError:  # non-finite input
        outs = [np.full(a.shape, np.nan) for a in out_avals]
    return [o.astype(a.dtype) for o, a in zip(outs, out_avals)]


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: Any = None, algorithm: Any = None) -> Any:
    """Singular value decomposition ``x = u @ diag(s) @ vh``, singular values descending:
    ``(u, s, vh)``, or just ``s`` when ``compute_uv=False``."""
    if subset_by_index is not None:
        raise EmberValueError("svd: subset_by_index is not supported")
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vh = outs
    return u, s, vh


# --- pivots to permutation ------------------------------------------------------------------

lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation")


@lu_pivots_to_permutation_p.def_abstract_eval
def _pivots_abstract(pivots: ShapedArray, *, permutation_size: int) -> ShapedArray:
    if not dtypes.is_integer(pivots.dtype) or pivots.ndim < 1:
        raise EmberTypeError(f"lu_pivots_to_permutation needs integer pivots, got "
                             f"{pivots.dtype}{list(pivots.shape)}")
    if permutation_size < pivots.shape[-1]:
        raise EmberValueError(f"lu_pivots_to_permutation: permutation_size {permutation_size} "
                              f"is smaller than the number of pivots {pivots.shape[-1]}")
    return ShapedArray((*pivots.shape[:-1], permutation_size), pivots.dtype)


@lu_pivots_to_permutation_p.def_impl
def _pivots_impl(pivots: np.ndarray, *, permutation_size: int) -> np.ndarray:
    pivots = np.asarray(pivots)
    flat = pivots.reshape(math.prod(pivots.shape[:-1]), pivots.shape[-1])  # (not -1: see lu)
    perm = np.tile(np.arange(permutation_size, dtype=pivots.dtype), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for i in range(flat.shape[1]):
        swap = np.clip(flat[:, i], 0, permutation_size - 1)
        perm[rows, i], perm[rows, swap] = perm[rows, swap], perm[rows, i].copy()
    return perm.reshape(*pivots.shape[:-1], permutation_size)


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """The row permutation that applying the LU row swaps ``pivots`` in order gives."""
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


# --- transformation rules ------------------------------------------------------------------

def _constant_matrix(values: np.ndarray, like: Any) -> Any:
    """A constant (n, m) matrix broadcast to the (..., n, m) shape and dtype of ``like``."""
    nd = like.ndim
    return broadcast_in_dim(values.astype(like.dtype), like.shape, (nd - 2, nd - 1))


def _triangle(x: Any, k: int = 0, upper: bool = False) -> Any:
    """``tril(x, k)`` (or ``triu``) as a product with a constant mask, so it is linear."""
    ones = np.ones(x.shape[-2:], bool)
    mask = np.triu(ones, k) if upper else np.tril(ones, k)
    return ew.mul(x, _constant_matrix(mask, x))


def _eye_like(x: Any) -> Any:
    return _constant_matrix(np.eye(*x.shape[-2:]), x)


def _real_diagonal_part(x: Any) -> Any:
    """The diagonal of ``x`` as a matrix, real part only (what Hermitian routines read)."""
    diagonal = _triangle(_triangle(x), upper=True)
    if dtypes.is_complex(x.dtype):
        diagonal = ew.convert_element_type(ew.real(diagonal), x.dtype)
    return diagonal


def _hermitian_from_triangle(t: Any, lower: bool) -> Any:
    """The Hermitian matrix that a routine reading only the ``lower`` (or upper) triangle
    of ``t`` sees: the tangent of such a routine's input."""
    strict = _triangle(t, -1) if lower else _triangle(t, 1, upper=True)
    return ew.add(ew.add(strict, _adjoint(strict)), _real_diagonal_part(t))


def _cholesky_jvp(primals: Sequence[Any], tangents: Sequence[Any]):
    """dL = L Φ(L⁻¹ dA L⁻ᴴ), Φ keeping the lower triangle with a halved diagonal."""
    (x,), (t,) = primals, tangents
    factor = cholesky_p.bind(x)
    da = _hermitian_from_triangle(t, lower=True)
    left = triangular_solve(factor, da, left_side=True, lower=True)
    middle = triangular_solve(factor, left, left_side=False, lower=True, transpose_a=True,
                              conjugate_a=True)
    n = x.shape[-1]
    phi = ew.mul(middle, _constant_matrix(np.tril(np.ones((n, n))) - 0.5 * np.eye(n), middle))
    return factor, batch_matmul(factor, phi)


def _lu_jvp(primals: Sequence[Any], tangents: Sequence[Any]):
    """With P x = L U, L⁻¹ P dx U⁻¹ splits into L⁻¹ dL (strictly lower) and dU U⁻¹ (upper)."""
    (x,), (t,) = primals, tangents
    packed, pivots, perm = lu_p.bind(x)
    if x.shape[-1] != x.shape[-2]:
        raise EmberValueError(f"lu: derivatives are implemented for square matrices only, "
                              f"got shape {x.shape}")
    lower = ew.add(_triangle(packed, -1), _eye_like(packed))
    upper = _triangle(packed, upper=True)
    columns = broadcasted_iota(perm.dtype, x.shape, x.ndim - 1)
    rows = broadcast_in_dim(perm, x.shape, tuple(range(x.ndim - 1)))
    permutation = ew.convert_element_type(ew.eq(rows, columns), x.dtype)
    solved = triangular_solve(lower, batch_matmul(permutation, t), left_side=True, lower=True,
                              unit_diagonal=True)
    solved = triangular_solve(upper, solved, left_side=False, lower=False)
    tangent = ew.add(batch_matmul(lower, _triangle(solved, -1)),
                     batch_matmul(_triangle(solved, upper=True), upper))
    return [packed, pivots, perm], [tangent, Zero.like(pivots), Zero.like(perm)]


def _op_of(t: Any, *, lower: bool, transpose_a: bool, conjugate_a: bool,
           unit_diagonal: bool) -> Any:
    """op(t) restricted to the triangle a triangular solve reads (the tangent of op(a))."""
    t = _triangle(t, -1 if unit_diagonal else 0) if lower else \
        _triangle(t, 1 if unit_diagonal else 0, upper=True)
    if conjugate_a and dtypes.is_complex(t.dtype):
        t = ew.conj(t)
    return _swap_last(t) if transpose_a else t


def _triangular_solve_jvp_a(t: Any, out: Any, a: Any, b: Any, **params: Any) -> Any:
    """op(a) x = b gives op(da) x + op(a) dx = 0 (and x op(a) = b likewise on the right)."""
    op_t = _op_of(t, **{k: params[k] for k in
                        ("lower", "transpose_a", "conjugate_a", "unit_diagonal")})
    product = batch_matmul(op_t, out) if params["left_side"] else batch_matmul(out, op_t)
    return ew.neg(triangular_solve_p.bind(a, product, **params))


def _triangular_solve_transpose(ct: Any, a: Any, b: Any, **params: Any) -> list:
    if is_undefined_primal(a):
        raise EmberValueError("triangular_solve is not linear in the matrix a")
    return [None, triangular_solve_p.bind(a, ct, **{**params,
                                                    "transpose_a": not params["transpose_a"]})]


def _qr_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, full_matrices: bool):
    """For x = q r with r square (m >= n, reduced; or square x): C = qᴴ dx r⁻¹ splits into
    a skew-Hermitian part (qᴴ dq) and an upper triangular part (dr r⁻¹)."""
    (x,), (t,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    m, n = x.shape[-2:]
    if m < n or (full_matrices and m != n):
        raise EmberValueError(
            f"qr: derivatives need m >= n and, unless x is square, full_matrices=False; got "
            f"shape {x.shape} with full_matrices={full_matrices}")
    dx_rinv = triangular_solve(r, t, left_side=False, lower=False)
    c = batch_matmul(_adjoint(q), dx_rinv)
    strict = _triangle(c, -1)
    skew = ew.sub(strict, _adjoint(strict))
    if dtypes.is_complex(x.dtype):  # the diagonal of qᴴ dq is imaginary
        skew = ew.add(skew, ew.sub(_triangle(_triangle(c), upper=True),
                                   _real_diagonal_part(c)))
    dq = ew.add(batch_matmul(q, ew.sub(skew, c)), dx_rinv)
    dr = batch_matmul(ew.sub(c, skew), r)
    return [q, r], [dq, dr]


def _columns(v: Any, shape: tuple[int, ...]) -> Any:
    """A (..., k) vector broadcast along the rows of a (..., r, k) matrix: entry j in column j."""
    nd = len(shape)
    return broadcast_in_dim(v, shape, (*range(nd - 2), nd - 1))


def _inverse_gaps(w: Any) -> Any:
    """(..., k) values -> the (..., k, k) matrix of 1 / (w_j - w_i), zero on the diagonal
    (the diagonal is never divided by zero, so reverse mode stays finite there)."""
    shape = (*w.shape, w.shape[-1])
    nd = len(shape)
    w_i = broadcast_in_dim(w, shape, tuple(range(nd - 1)))
    on_diagonal = broadcast_in_dim(np.eye(shape[-1], dtype=bool), shape, (nd - 2, nd - 1))
    one = broadcast_in_dim(np.ones((), w.dtype), shape, ())
    zero = broadcast_in_dim(np.zeros((), w.dtype), shape, ())
    gap = ew.select_n(on_diagonal, ew.sub(_columns(w, shape), w_i), one)
    return ew.select_n(on_diagonal, ew.div(one, gap), zero)


def _safe_reciprocal(s: Any) -> Any:
    """1 / s, and 0 where s == 0 (never dividing by zero, for reverse mode's sake)."""
    zero = broadcast_in_dim(np.zeros((), s.dtype), s.shape, ())
    one = broadcast_in_dim(np.ones((), s.dtype), s.shape, ())
    is_zero = ew.eq(s, zero)
    return ew.select_n(is_zero, ew.div(one, ew.select_n(is_zero, s, one)), zero)


def _real_diagonal(x: Any) -> Any:
    diagonal = reduce_sum(ew.mul(x, _eye_like(x)), (x.ndim - 1,))
    return ew.real(diagonal) if dtypes.is_complex(x.dtype) else diagonal


def _eigh_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, lower: bool):
    """dw = diag(vᴴ dA v), dv = v (F ∘ vᴴ dA v), F_ij = 1 / (w_j - w_i) off the diagonal."""
    (x,), (t,) = primals, tangents
    v, w = eigh_p.bind(x, lower=lower)
    projected = batch_matmul(_adjoint(v), batch_matmul(_hermitian_from_triangle(t, lower), v))
    weighted = ew.mul(projected, ew.convert_element_type(_inverse_gaps(w), x.dtype))
    return [v, w], [batch_matmul(v, weighted), _real_diagonal(projected)]


def _svd_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, full_matrices: bool,
             compute_uv: bool):
    """With P = uᴴ dA v (reduced factors) and F_ij = 1 / (s_j² - s_i²):
    ds = Re diag(P); du = u (F ∘ (P S + S Pᴴ) + i Im(diag P) / S) + (I - u uᴴ) dA v / S;
    dv = v (F ∘ (S P + Pᴴ S)) + (I - v vᴴ) dAᴴ u / S."""
    (x,), (t,) = primals, tangents
    m, n = x.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise EmberValueError(f"svd: derivatives of full_matrices=True factors of non-square "
                              f"matrices are not implemented (shape {x.shape}); use "
                              "full_matrices=False")
    s, u, vh = svd_p.bind(x, full_matrices=False, compute_uv=True)
    v = _adjoint(vh)
    p = batch_matmul(_adjoint(u), batch_matmul(t, v))
    ds = _real_diagonal(p)
    if not compute_uv:
        return [s], [ds]
    s_c = ew.convert_element_type(s, x.dtype)
    s_cols = _columns(s_c, p.shape)                       # S on the right: P S
    s_rows = _swap_last(s_cols)                            # S on the left: S P
    gaps = ew.convert_element_type(_inverse_gaps(ew.mul(s, s)), x.dtype)
    p_s, s_p = ew.mul(p, s_cols), ew.mul(s_rows, p)
    du_core = ew.mul(gaps, ew.add(p_s, _adjoint(p_s)))
    if dtypes.is_complex(x.dtype):  # the common phase of u and v columns: keep it out of v
        inverse_s = ew.convert_element_type(_safe_reciprocal(s), x.dtype)
        on_diagonal = ew.mul(_columns(inverse_s, p.shape), _eye_like(p))
        du_core = ew.add(du_core, ew.mul(ew.mul(ew.sub(p, _adjoint(p)), 0.5), on_diagonal))
    du = batch_matmul(u, du_core)
    dv = batch_matmul(v, ew.mul(gaps, ew.add(s_p, _adjoint(s_p))))
    if m > n:
        dav = batch_matmul(t, v)
        rest = ew.sub(dav, batch_matmul(u, batch_matmul(_adjoint(u), dav)))
        du = ew.add(du, ew.div(rest, _columns(s_c, rest.shape)))
    if n > m:
        dahu = batch_matmul(_adjoint(t), u)
        rest = ew.sub(dahu, batch_matmul(v, batch_matmul(vh, dahu)))
        dv = ew.add(dv, ew.div(rest, _columns(s_c, rest.shape)))
    return [s, u, vh], [ds, du, _adjoint(dv)]


def _batch_leading(prim: Primitive, values: Sequence[Any], dims: Sequence[int | None],
                   **params: Any):
    """Map over a batch axis by making it the first of the leading (stack) dimensions."""
    size = batch_size(values, dims)
    moved = [move_batch_axis(v, d, 0, size) for v, d in zip(values, dims)]
    out = prim.bind(*moved, **params)
    return out, ([0] * len(out) if prim.multiple_results else 0)


cholesky_p.def_jvp(_cholesky_jvp)
lu_p.def_jvp(_lu_jvp)
qr_p.def_jvp(_qr_jvp)
eigh_p.def_jvp(_eigh_jvp)
svd_p.def_jvp(_svd_jvp)
defjvp_zero(lu_pivots_to_permutation_p)  # integer-valued
defjvp2(triangular_solve_p, _triangular_solve_jvp_a,
        lambda t, out, a, b, **params: triangular_solve_p.bind(a, t, **params))
triangular_solve_p.def_transpose(_triangular_solve_transpose)
eig_p.waive("jvp", "eig is not differentiable in Ember (use eigh for Hermitian matrices)")
for _prim in (cholesky_p, lu_p, qr_p, eigh_p, eig_p, svd_p, lu_pivots_to_permutation_p):
    _prim.waive("transpose", "not linear")
for _prim in (cholesky_p, lu_p, triangular_solve_p, qr_p, eigh_p, eig_p, svd_p,
              lu_pivots_to_permutation_p):
    _prim.def_batch(functools.partial(_batch_leading, _prim))


for _prim in (cholesky_p, lu_p, lu_pivots_to_permutation_p, triangular_solve_p, qr_p, eigh_p,
              eig_p, svd_p):
    _prim.waive("sharding", "a matrix decomposition needs whole matrices")
