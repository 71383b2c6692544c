"""``ember.scipy.linalg``: dense linear algebra with SciPy's conventions (as
``jax.scipy.linalg``): upper Cholesky factors by default, ``(c, lower)`` and
``(lu, piv)`` factor tuples, ``P @ L @ U`` from ``lu``, ``trans`` codes for triangular
and LU solves.

The ``overwrite_*`` and ``check_finite`` arguments are accepted for compatibility and do
nothing (arrays are immutable; failures give NaN, as in JAX).
"""
from __future__ import annotations

import math
from typing import Any

from ember import lax
from ember import numpy as jnp
from ember.errors import EmberValueError
from ember.lax import linalg as lax_linalg
from ember.numpy._promotion import inexact_dtype, result_dtype

__all__ = [
    "block_diag",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "det",
    "eigh",
    "expm",
    "inv",
    "lu",
    "lu_factor",
    "lu_solve",
    "qr",
    "solve",
    "solve_triangular",
    "svd",
]


def _inexact(*arrays: Any) -> list[Any]:
    dtype = inexact_dtype(result_dtype(*arrays))
    return [jnp.asarray(a, dtype) for a in arrays]


def _adjoint(a: Any) -> Any:
    return jnp.conj(jnp.swapaxes(a, -1, -2))


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Any:
    """The Cholesky factor of a Hermitian positive definite ``a``: upper ``U`` with
    ``a = U^H U`` by default (SciPy's choice), lower ``L`` with ``lower=True``. Only that
    triangle of ``a`` is read (as SciPy and JAX), so gradients flow into it alone."""
    (a,) = _inexact(a)
    factor = _lower_factor(a, lower)
    return factor if lower else _adjoint(factor)


def _lower_factor(a: Any, lower: bool) -> Any:
    """``L`` with ``a = L L^H``, read from the triangle of ``a`` that ``lower`` names."""
    return lax_linalg.cholesky(a if lower else _adjoint(a), symmetrize_input=False)


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Any, bool]:
    """``(c, lower)`` for ``cho_solve``. Unlike SciPy, the other triangle of ``c`` is 0."""
    return cholesky(a, lower=lower), lower


def _as_columns(b: Any) -> tuple[Any, bool]:
    """``b`` as a matrix of right-hand sides, and whether it was one vector."""
    return (b[..., None], True) if b.ndim == 1 else (b, False)


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Any:
    """Solve ``a x = b`` given ``cho_factor(a)``."""
    c, lower = c_and_lower
    c, b = _inexact(c, b)
    rhs, vector = _as_columns(b)
    # a = L L^H: solve L y = b, then L^H x = y (with U = L^H when the factor is upper).
    y = lax_linalg.triangular_solve(c, rhs, left_side=True, lower=lower,
                                    transpose_a=not lower, conjugate_a=not lower)
    x = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower,
                                    transpose_a=lower, conjugate_a=lower)
    return x[..., 0] if vector else x


_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def _trans_flags(trans: int | str, name: str) -> tuple[bool, bool]:
    if trans not in _TRANS:
        raise EmberValueError(f"{name}: trans must be 0, 1, 2 (or 'N', 'T', 'C'), got "
                              f"{trans!r}")
    return _TRANS[trans]


def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False, debug: Any = None,
                     check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` for triangular ``a``, ``op`` set by ``trans`` (0: ``a``, 1:
    ``a^T``, 2: ``a^H``); only the triangle named by ``lower`` is read."""
    transpose_a, conjugate_a = _trans_flags(trans, "solve_triangular")
    a, b = _inexact(a, b)
    rhs, vector = _as_columns(b)
    x = lax_linalg.triangular_solve(a, rhs, left_side=True, lower=lower,
                                    transpose_a=transpose_a, conjugate_a=conjugate_a,
                                    unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True
              ) -> tuple[Any, Any]:
    """``(lu, piv)``: L (unit lower, below the diagonal) and U packed in one matrix, and
    LAPACK's pivots (row ``i`` was swapped with row ``piv[i]``)."""
    (a,) = _inexact(a)
    packed, pivots, _ = lax_linalg.lu(a)
    return packed, pivots


def _unpack_lu(packed: Any) -> tuple[Any, Any]:
    m, n = packed.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(packed[..., :, :k], -1) + jnp.eye(m, k, dtype=packed.dtype)
    upper = jnp.triu(packed[..., :k, :])
    return lower, upper


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False,
       check_finite: bool = True) -> tuple[Any, Any] | tuple[Any, Any, Any]:
    """``(p, l, u)`` with ``a = p @ l @ u``; ``(p @ l, u)`` with ``permute_l``."""
    (a,) = _inexact(a)
    packed, _, permutation = lax_linalg.lu(a)
    lower, upper = _unpack_lu(packed)
    # Row i of l @ u is row permutation[i] of a, so p has a 1 at (permutation[i], i).
    m = a.shape[-2]
    p = jnp.swapaxes(jnp.eye(m, dtype=a.dtype)[permutation], -1, -2)
    if permute_l:
        return jnp.matmul(p, lower), upper
    return p, lower, upper


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` given ``lu_factor(a)``, ``op`` set by ``trans`` as in
    ``solve_triangular``."""
    transpose_a, conjugate_a = _trans_flags(trans, "lu_solve")
    packed, pivots = lu_and_piv
    packed, b = _inexact(packed, b)
    rhs, vector = _as_columns(b)
    permutation = lax_linalg.lu_pivots_to_permutation(pivots, packed.shape[-2])
    if not transpose_a:  # a = P L U: solve L U x = P^T b
        permuted = jnp.take_along_axis(rhs, permutation[..., None], axis=-2)
        y = lax_linalg.triangular_solve(packed, permuted, left_side=True, lower=True,
                                        unit_diagonal=True)
        x = lax_linalg.triangular_solve(packed, y, left_side=True, lower=False)
    else:  # op(a) = op(U) op(L) P^T: solve op(U) op(L) z = b, then x = P z
        flags = {"left_side": True, "transpose_a": True, "conjugate_a": conjugate_a}
        y = lax_linalg.triangular_solve(packed, rhs, lower=False, **flags)
        z = lax_linalg.triangular_solve(packed, y, lower=True, unit_diagonal=True, **flags)
        x = jnp.take_along_axis(z, jnp.argsort(permutation, axis=-1)[..., None], axis=-2)
    return x[..., 0] if vector else x


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True
       ) -> tuple[Any] | tuple[Any, Any] | tuple[Any, Any, Any]:
    """``(q, r)`` with ``a = q @ r``; mode 'full' (square ``q``), 'economic' (``min(m, n)``
    columns) or 'r' (the tuple ``(r,)``, as SciPy)."""
    if mode not in ("full", "economic", "r"):
        raise EmberValueError(f"qr: mode must be 'full', 'economic' or 'r', got {mode!r}")
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported; pass pivoting=False")
    (a,) = _inexact(a)
    q, r = lax_linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        overwrite_a: bool = False, check_finite: bool = True,
        lapack_driver: str = "gesdd") -> Any:
    """``(u, s, vh)`` with ``a = u @ diag(s) @ vh``, ``s`` descending; only ``s`` without
    ``compute_uv``. ``lapack_driver`` is accepted for compatibility."""
    if lapack_driver not in ("gesdd", "gesvd"):
        raise EmberValueError(f"svd: lapack_driver must be 'gesdd' or 'gesvd', got "
                              f"{lapack_driver!r}")
    (a,) = _inexact(a)
    result = jnp.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return result if not compute_uv else tuple(result)


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False,
         overwrite_a: bool = False, overwrite_b: bool = False, turbo: bool = True,
         eigvals: None = None, type: int = 1, check_finite: bool = True) -> Any:
    """``(w, v)``, eigenvalues ascending and eigenvectors in columns, of a Hermitian
    ``a`` read from the triangle named by ``lower``; only ``w`` with ``eigvals_only``."""
    if b is not None:
        raise NotImplementedError("eigh: the generalized problem (b) is not supported, as "
                                  "in JAX; pass b=None")
    if eigvals is not None:
        raise NotImplementedError("eigh: eigvals (a subset) is not supported, as in JAX")
    (a,) = _inexact(a)
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=False)
    return w if eigvals_only else (w, v)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    (a,) = _inexact(a)
    return jnp.linalg.det(a)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    (a,) = _inexact(a)
    return jnp.linalg.inv(a)


_ASSUME = ("gen", "sym", "her", "pos")


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, debug: bool = False, check_finite: bool = True,
          assume_a: str = "gen") -> Any:
    """Solve ``a x = b``. With ``assume_a='pos'`` through a Cholesky factor of the
    triangle named by ``lower``; otherwise by LU (symmetric matrices gain nothing)."""
    if assume_a not in _ASSUME:
        raise EmberValueError(f"solve: assume_a must be one of {_ASSUME}, got {assume_a!r}")
    a, b = _inexact(a, b)
    if assume_a == "pos":
        return cho_solve((_lower_factor(a, lower), True), b)
    rhs, vector = _as_columns(b)
    x = jnp.linalg.solve(a, rhs)
    return x[..., 0] if vector else x


def block_diag(*arrs: Any) -> Any:
    """The block-diagonal matrix of ``arrs`` (scalars and vectors count as one row)."""
    if not arrs:
        arrs = (jnp.zeros((1, 0)),)
    blocks = [jnp.atleast_2d(jnp.asarray(a)) for a in arrs]
    for i, block in enumerate(blocks):
        if block.ndim != 2:
            raise EmberValueError(f"block_diag: argument {i} has {block.ndim} dimensions; "
                                  "each must have at most 2")
    dtype = result_dtype(*blocks)
    widths = [block.shape[1] for block in blocks]
    rows, before = [], 0
    for block, width in zip(blocks, widths):
        after = sum(widths) - before - width
        rows.append(jnp.pad(block.astype(dtype), ((0, 0), (before, after))))
        before += width
    return jnp.concatenate(rows, axis=0)


# --- expm: scaling and squaring with the [13/13] Pade approximant (Higham, 2005) ---------

_PADE_DEGREE = 13
_THETA_13 = 5.371920351148152  # the largest 1-norm for which degree 13 is exact in float64


def _pade_coefficients(m: int) -> list[float]:
    """``b_j = (2m - j)! m! / ((2m)! j! (m - j)!)``, the [m/m] Pade coefficients of exp."""
    f = math.factorial
    return [f(2 * m - j) * f(m) / (f(2 * m) * f(j) * f(m - j)) for j in range(m + 1)]


def _pade13(a: Any) -> Any:
    """``q(a)^-1 p(a)`` with ``p(a) = V + U`` and ``q(a) = V - U`` (U the odd part),
    grouped by powers of ``a^2`` to need six products."""
    b = _pade_coefficients(_PADE_DEGREE)
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
             + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = (a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2)
         + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye)
    return jnp.linalg.solve(v - u, v + u)


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:
    """The matrix exponential of ``A`` (square, or a stack of them). ``A`` is scaled by
    ``2^-s`` into the approximant's range, and the result squared ``s`` times, at most
    ``max_squarings`` (beyond that the result is NaN, as JAX). ``upper_triangular`` is a
    hint JAX uses to skip work; the general path gives the same answer."""
    (a,) = _inexact(A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise EmberValueError(f"expm needs square matrices, got shape {tuple(a.shape)}")
    if a.ndim > 2:
        return jnp.vectorize(lambda m: expm(m, max_squarings=max_squarings),
                             signature="(n,n)->(n,n)")(a)
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=0))
    squarings = jnp.maximum(0, jnp.ceil(jnp.log2(norm / _THETA_13)))
    squarings = jnp.where(jnp.isfinite(squarings), squarings, max_squarings + 1)
    squarings = lax.stop_gradient(squarings)  # a step count: piecewise constant
    result = _pade13(a / (2.0 ** squarings).astype(a.dtype))

    def square_while_needed(r: Any, i: Any) -> tuple[Any, None]:
        return lax.cond(i < squarings, lambda m: m @ m, lambda m: m, r), None

    result, _ = lax.scan(square_while_needed, result,
                         jnp.arange(max_squarings, dtype=squarings.dtype))
    return jnp.where(squarings > max_squarings, jnp.nan, result)


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
