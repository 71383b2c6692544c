"""ember.scipy.linalg against scipy.linalg (values), numerical gradients, jit, and JAX
where installed."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import ember
from ember.scipy import linalg
from ember.test_util import check_grads

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 4))
SPD = A @ A.T + 4 * np.eye(4)
B = RNG.normal(size=(4, 2))
b = RNG.normal(size=4)
TALL, WIDE = RNG.normal(size=(5, 3)), RNG.normal(size=(3, 5))


def close(actual, expected, rtol=1e-11, atol=1e-12):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_cho_factor_cho_solve(lower, x64):
    close(linalg.cholesky(SPD, lower=lower), sla.cholesky(SPD, lower=lower))
    half = np.tril(SPD) if lower else np.triu(SPD)  # only the named triangle is read
    close(linalg.cholesky(half, lower=lower), sla.cholesky(SPD, lower=lower))
    factor = linalg.cho_factor(SPD, lower=lower)
    assert factor[1] is lower
    for rhs in (B, b):
        close(linalg.cho_solve(factor, rhs), sla.cho_solve(sla.cho_factor(SPD, lower=lower),
                                                           rhs))


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_triangular(trans, lower, x64):
    for rhs in (B, b):
        for unit in (False, True):
            close(linalg.solve_triangular(A, rhs, trans=trans, lower=lower, unit_diagonal=unit),
                  sla.solve_triangular(A, rhs, trans=trans, lower=lower, unit_diagonal=unit),
                  rtol=1e-10)


@pytest.mark.parametrize("a", [A, TALL, WIDE], ids=["square", "tall", "wide"])
def test_lu(a, x64):
    for got, expected in zip(linalg.lu(a), sla.lu(a)):
        close(got, expected)
    for got, expected in zip(linalg.lu(a, permute_l=True), sla.lu(a, permute_l=True)):
        close(got, expected)


@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_factor_lu_solve(trans, x64):
    lu_piv = linalg.lu_factor(A)
    reference = sla.lu_factor(A)
    close(lu_piv[0], reference[0])
    np.testing.assert_array_equal(lu_piv[1], reference[1])
    for rhs in (B, b):
        close(linalg.lu_solve(lu_piv, rhs, trans=trans), sla.lu_solve(reference, rhs, trans=trans),
              rtol=1e-10)


def test_lu_solve_on_a_stack(x64):
    a, rhs = RNG.normal(size=(3, 4, 4)), RNG.normal(size=(3, 4, 2))
    lu_piv = linalg.lu_factor(a)
    for trans in (0, 1):
        close(linalg.lu_solve(lu_piv, rhs, trans=trans),
              [sla.lu_solve(sla.lu_factor(a[i]), rhs[i], trans=trans) for i in range(3)],
              rtol=1e-10)


@pytest.mark.parametrize("mode", ["full", "economic", "r"])
def test_qr(mode, x64):
    for a in (TALL, WIDE):
        got, expected = linalg.qr(a, mode=mode), sla.qr(a, mode=mode)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):  # columns of q and rows of r agree up to sign
            close(np.abs(np.asarray(g)), np.abs(e))
        if mode != "r":
            close(np.asarray(got[0]) @ np.asarray(got[1]), a)


def test_svd(x64):
    for a in (TALL, WIDE):
        close(linalg.svd(a, compute_uv=False), sla.svd(a, compute_uv=False))
        for full in (True, False):
            u, s, vh = linalg.svd(a, full_matrices=full)
            ref = sla.svd(a, full_matrices=full)
            assert [x.shape for x in (u, s, vh)] == [x.shape for x in ref]
            k = len(s)
            close((np.asarray(u)[:, :k] * s) @ np.asarray(vh)[:k], a)


@pytest.mark.parametrize("lower", [True, False])
def test_eigh(lower, x64):
    a = np.tril(SPD) if lower else np.triu(SPD)  # only the named triangle is read
    w, v = linalg.eigh(a, lower=lower)
    ref_w, ref_v = sla.eigh(a, lower=lower)
    close(w, ref_w)
    close(np.abs(np.asarray(v)), np.abs(ref_v))
    close(linalg.eigh(a, lower=lower, eigvals_only=True), ref_w)
    with pytest.raises(NotImplementedError, match="generalized"):
        linalg.eigh(SPD, b=SPD)


@pytest.mark.parametrize("scale", [1e-3, 0.5, 3.0, 40.0])
def test_expm(scale, x64):
    expected = sla.expm(scale * A)
    np.testing.assert_allclose(linalg.expm(scale * A), expected, rtol=1e-10,
                               atol=1e-12 * np.abs(expected).max())


def test_expm_of_a_stack_and_beyond_max_squarings(x64):
    stack = RNG.normal(size=(2, 3, 3))
    close(linalg.expm(stack), [sla.expm(m) for m in stack], rtol=1e-10)
    close(linalg.expm(np.zeros((3, 3))), np.eye(3))
    assert np.isnan(np.asarray(linalg.expm(1e3 * A, max_squarings=4))).all()


def test_det_inv_solve(x64):
    close(linalg.det(A), sla.det(A))
    close(linalg.inv(A), sla.inv(A), rtol=1e-10)
    for rhs in (B, b):
        close(linalg.solve(A, rhs), sla.solve(A, rhs), rtol=1e-10)
        close(linalg.solve(SPD, rhs, assume_a="pos"), sla.solve(SPD, rhs, assume_a="pos"))
        for lower in (False, True):  # 'pos' reads only the named triangle, as SciPy
            half = np.tril(SPD) if lower else np.triu(SPD)
            close(linalg.solve(half, rhs, assume_a="pos", lower=lower),
                  sla.solve(half, rhs, assume_a="pos", lower=lower))
    with pytest.raises(ValueError, match="assume_a") as error:
        linalg.solve(A, b, assume_a="banded")
    assert "test_scipy_linalg.py" in str(error.value)  # the error names the caller's line


def test_block_diag(x64):
    blocks = (np.ones((2, 2)), 3.0, np.arange(3.0), np.ones((2, 1)))
    close(linalg.block_diag(*blocks), sla.block_diag(*blocks))
    assert linalg.block_diag(np.ones((1, 1), np.int32)).dtype == np.int32


def _symmetric(x):
    return (x + x.T) / 2


GRADIENT_CASES = {
    "cholesky": (lambda a: linalg.cholesky(_symmetric(a)), (SPD,)),
    "cho_solve": (lambda a, r: linalg.cho_solve(linalg.cho_factor(_symmetric(a)), r),
                  (SPD, B)),
    "solve_triangular": (lambda a, r: linalg.solve_triangular(a, r, trans=1, lower=True),
                         (A + 4 * np.eye(4), B)),
    "lu_solve": (lambda a, r: linalg.lu_solve(linalg.lu_factor(a), r), (A, B)),
    "lu": (lambda a: linalg.lu(a)[1:], (A,)),
    "qr": (lambda a: linalg.qr(a, mode="economic"), (TALL,)),
    "svd": (lambda a: linalg.svd(a, compute_uv=False), (TALL,)),
    "eigh": (lambda a: linalg.eigh(_symmetric(a), eigvals_only=True), (SPD,)),
    "expm": (linalg.expm, (0.7 * A,)),
    "det": (linalg.det, (A,)),
    "inv": (linalg.inv, (A,)),
    "solve": (linalg.solve, (A, B)),
    "block_diag": (linalg.block_diag, (A[:2], b)),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
def test_gradients(name, x64):
    fn, args = GRADIENT_CASES[name]
    check_grads(fn, args, order=1, rtol=1e-5, atol=1e-7, eps=1e-6)


def test_under_jit(x64):
    def program(a, spd, rhs):
        c = linalg.cho_factor(spd)
        return (linalg.cho_solve(c, rhs), linalg.expm(a), linalg.lu_solve(linalg.lu_factor(a),
                                                                            rhs),
                linalg.det(a))

    for got, expected in zip(ember.jit(program)(A, SPD, B), program(A, SPD, B)):
        close(got, expected, rtol=1e-12)


def test_matches_jax(x64):
    jax = pytest.importorskip("jax")
    jla = pytest.importorskip("jax.scipy.linalg")
    with jax.enable_x64(True):
        close(linalg.cho_solve(linalg.cho_factor(SPD), B), jla.cho_solve(jla.cho_factor(SPD), B))
        close(linalg.solve_triangular(A, B, trans="T"), jla.solve_triangular(A, B, trans="T"))
        close(linalg.lu_solve(linalg.lu_factor(A), B, trans=1),
              jla.lu_solve(jla.lu_factor(A), B, trans=1), rtol=1e-10)
        for got, expected in zip(linalg.lu(TALL), jla.lu(TALL)):
            close(got, expected)
        close(linalg.expm(3.0 * A), jla.expm(3.0 * A), rtol=1e-10, atol=1e-10)
        close(linalg.block_diag(A[:2], b), jla.block_diag(A[:2], b))
        grad_ours = ember.grad(lambda a: ember.numpy.sum(linalg.expm(a) ** 2))(0.7 * A)
        grad_jax = jax.grad(lambda a: jax.numpy.sum(jla.expm(a) ** 2))(0.7 * A)
        close(grad_ours, grad_jax, rtol=1e-8)
        grad_ours = ember.grad(lambda a: ember.numpy.sum(linalg.cho_solve(
            linalg.cho_factor(a), B)))(SPD)
        grad_jax = jax.grad(lambda a: jax.numpy.sum(jla.cho_solve(jla.cho_factor(a), B)))(SPD)
        # Both read one triangle, but JAX's rule extends the derivative off the symmetric
        # matrices differently (ours is the finite-difference one): along every symmetric
        # direction, that is in their symmetric parts, they agree.
        close(_symmetric(np.asarray(grad_ours)), _symmetric(np.asarray(grad_jax)), rtol=1e-8)
