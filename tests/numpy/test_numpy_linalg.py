"""ember.numpy.linalg against numpy.linalg on generated stacks of matrices."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.numpy as enp
from ember.errors import EmberValueError

la = enp.linalg
BATCH = st.lists(st.integers(1, 3), max_size=2).map(tuple)


def _close(actual, expected, rtol=2e-3, atol=2e-4):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def _well_conditioned(seed, batch, n):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(*batch, n, n)) + 3 * np.eye(n)).astype(np.float32)


def _spd(seed, batch, n):
    a = np.random.default_rng(seed).normal(size=(*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np.float32)


@given(batch=BATCH, n=st.integers(1, 4), seed=st.integers(0, 999))
def test_inv_det_slogdet_solve(batch, n, seed):
    a = _well_conditioned(seed, batch, n)
    _close(la.inv(a), np.linalg.inv(a))
    _close(la.det(a), np.linalg.det(a), rtol=1e-3, atol=1e-3)
    sign, logabsdet = la.slogdet(a)
    expected = np.linalg.slogdet(a)
    _close(sign, expected.sign)
    _close(logabsdet, expected.logabsdet, atol=1e-3)
    b = np.random.default_rng(seed + 1).normal(size=(*batch, n, 2)).astype(np.float32)
    _close(la.solve(a, b), np.linalg.solve(a, b))
    vector = b[(0,) * len(batch)][:, 0]
    _close(la.solve(a, vector), np.linalg.solve(a, vector[..., None])[..., 0])


def test_solve_broadcasts_batches_and_det_of_singular():
    a = _well_conditioned(0, (2, 1), 3)
    b = np.ones((4, 3, 1), np.float32)
    _close(la.solve(a, b), np.linalg.solve(a, b))
    assert float(la.det(np.ones((3, 3)))) == 0.0
    sign, logabsdet = la.slogdet(np.zeros((2, 2)))
    assert float(sign) == 0.0 and float(logabsdet) == -math.inf
    _close(la.det(np.array([[0.0, 1.0], [1.0, 0.0]])), -1.0)  # one row swap


def test_complex_det_and_solve():
    rng = np.random.default_rng(3)
    a = (rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3)) + 3 * np.eye(3)).astype(
        np.complex64)
    _close(la.det(a), np.linalg.det(a), rtol=1e-3)
    sign, logabsdet = la.slogdet(a)
    _close(sign, np.linalg.slogdet(a).sign, rtol=1e-3)
    _close(la.inv(a), np.linalg.inv(a), rtol=1e-3)


@given(batch=BATCH, n=st.integers(1, 4), seed=st.integers(0, 999))
def test_cholesky_eigh_qr(batch, n, seed):
    a = _spd(seed, batch, n)
    _close(la.cholesky(a), np.linalg.cholesky(a), rtol=1e-3)
    _close(la.cholesky(a, upper=True), np.swapaxes(np.linalg.cholesky(a), -1, -2), rtol=1e-3)
    w, v = la.eigh(a)
    _close(w, np.linalg.eigvalsh(a), rtol=1e-3, atol=1e-3)
    _close(np.asarray(v) * np.asarray(w)[..., None, :], a @ np.asarray(v), rtol=1e-2, atol=1e-2)
    _close(la.eigvalsh(a), np.linalg.eigvalsh(a), rtol=1e-3, atol=1e-3)
    m = np.random.default_rng(seed).normal(size=(*batch, n + 1, n)).astype(np.float32)
    q, r = la.qr(m)
    _close(np.asarray(q) @ np.asarray(r), m, atol=1e-4)
    assert q.shape == (*batch, n + 1, n)
    assert la.qr(m, mode="complete").Q.shape == (*batch, n + 1, n + 1)
    _close(np.abs(np.asarray(la.qr(m, mode="r"))), np.abs(np.linalg.qr(m, mode="r")), atol=1e-4)


VECTOR_ORDS = [None, 1, 2, 3, 0.5, np.inf, -np.inf, 0]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@settings(max_examples=15)
@given(seed=st.integers(0, 999), rows=st.integers(1, 4), cols=st.integers(1, 4))
def test_norms_match_numpy(seed, rows, cols):
    a = np.random.default_rng(seed).normal(size=(2, rows, cols)).astype(np.float32)
    for ord in VECTOR_ORDS:
        _close(la.norm(a[0, 0], ord), np.linalg.norm(a[0, 0], ord), rtol=1e-4)
        _close(la.norm(a, ord, axis=1), np.linalg.norm(a, ord, axis=1), rtol=1e-4)
    for ord in MATRIX_ORDS:
        _close(la.norm(a, ord, axis=(1, 2)), np.linalg.norm(a, ord, axis=(1, 2)), rtol=1e-3)
        _close(la.norm(a[0], ord), np.linalg.norm(a[0], ord), rtol=1e-3)
        _close(la.norm(a, ord, axis=(2, 1), keepdims=True),
               np.linalg.norm(a, ord, axis=(2, 1), keepdims=True), rtol=1e-3)
    _close(la.norm(a), np.linalg.norm(a), rtol=1e-4)
    _close(la.vector_norm(a, axis=(0, 2), ord=3), np.sum(np.abs(a) ** 3, axis=(0, 2)) ** (1 / 3),
           rtol=1e-4)
    _close(la.matrix_norm(a, ord="nuc", keepdims=True),
           np.linalg.norm(a, "nuc", axis=(1, 2), keepdims=True), rtol=1e-3)
    _close(la.svdvals(a), np.linalg.svd(a, compute_uv=False), rtol=1e-3, atol=1e-3)


def test_matrix_rank_and_pinv():
    rng = np.random.default_rng(0)
    low_rank = (rng.normal(size=(5, 2)) @ rng.normal(size=(2, 4))).astype(np.float32)
    assert int(la.matrix_rank(low_rank)) == 2
    assert int(la.matrix_rank(np.eye(3))) == 3
    _close(la.pinv(low_rank), np.linalg.pinv(low_rank.astype(np.float64), rcond=1e-5),
           rtol=1e-3, atol=1e-4)
    small = np.diag(np.array([1.0, 1e-3, 1e-5], np.float32))
    _close(la.svdvals(small), [1.0, 1e-3, 1e-5], rtol=1e-3, atol=1e-7)
    assert int(la.matrix_rank(small)) == 3 and int(la.matrix_rank(small, rtol=1e-4)) == 2
    full = rng.normal(size=(4, 3)).astype(np.float32)
    _close(la.pinv(full), np.linalg.pinv(full), rtol=1e-3, atol=1e-4)
    _close(la.pinv(full.T), np.linalg.pinv(full.T), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1, -3])
def test_matrix_power(n):
    a = _well_conditioned(1, (2,), 3)
    _close(la.matrix_power(a, n), np.linalg.matrix_power(a, n), rtol=1e-3, atol=1e-3)


def test_array_api_aliases_and_multi_dot():
    a, b, c = (np.random.default_rng(i).normal(size=s).astype(np.float32)
               for i, s in enumerate([(2, 3), (3, 4), (4, 2)]))
    _close(la.multi_dot([a, b, c]), np.linalg.multi_dot([a, b, c]))
    _close(la.matmul(a, b), a @ b)
    _close(la.tensordot(a, b, 1), a @ b)
    _close(la.vecdot(a, a), np.sum(a * a, -1))
    _close(la.outer(a[0], b[0]), np.outer(a[0], b[0]))
    _close(la.matrix_transpose(a), a.T)
    _close(la.cross(np.eye(3), np.ones((3, 3))), np.cross(np.eye(3), np.ones((3, 3))))


def test_integer_input_becomes_float():
    out = la.inv(np.array([[2, 0], [0, 4]]))
    assert out.dtype == np.float32
    _close(out, [[0.5, 0], [0, 0.25]])


def test_linalg_errors():
    with pytest.raises(EmberValueError, match=r"inv needs square matrices, got shape \(2, 3\)"):
        la.inv(np.ones((2, 3)))
    with pytest.raises(EmberValueError, match=r"det needs a matrix .or a stack of them., got "
                                              r"shape \(3,\)"):
        la.det(np.ones(3))
    with pytest.raises(EmberValueError, match="do not match .3 unknowns."):
        la.solve(np.eye(3), np.ones(2))
    with pytest.raises(EmberValueError, match="unsupported ord 'max'"):
        la.matrix_norm(np.eye(2), ord="max")
    with pytest.raises(EmberValueError, match="mode must be 'reduced', 'complete' or 'r'"):
        la.qr(np.eye(2), mode="full")


def test_linalg_under_jit_matches_eager():
    def f(a, b):
        return la.solve(a, b), la.det(a), la.inv(a), la.norm(a, 2), la.cholesky(a @ a.T)

    a, b = _well_conditioned(0, (), 3), np.ones((3, 2), np.float32)
    with ember.config.override(backend="reference"):
        for eager, jitted in zip(f(a, b), ember.jit(f)(a, b)):
            np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-6)


@given(batch=BATCH, rows=st.integers(1, 4), cols=st.integers(1, 4), seed=st.integers(0, 999),
       full=st.booleans())
def test_svd_reconstructs_and_matches_numpys_values(batch, rows, cols, seed, full):
    a = np.random.default_rng(seed).normal(size=(*batch, rows, cols)).astype(np.float32)
    u, s, vh = la.svd(a, full_matrices=full)
    e_u, e_s, e_vh = np.linalg.svd(a, full_matrices=full)
    assert u.shape == e_u.shape and vh.shape == e_vh.shape
    _close(s, e_s)
    k = min(rows, cols)
    _close(np.asarray(u)[..., :k] * np.asarray(s)[..., None, :] @ np.asarray(vh)[..., :k, :], a)
    eye_u = np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] + (u.shape[-1],) * 2)
    _close(np.swapaxes(np.asarray(u), -1, -2) @ np.asarray(u), eye_u)
    _close(la.svd(a, compute_uv=False), e_s)


@given(rows=st.integers(1, 5), cols=st.integers(1, 4), rhs=st.sampled_from([None, 1, 3]),
       seed=st.integers(0, 999), dependent=st.booleans())
def test_lstsq_matches_numpy(rows, cols, rhs, seed, dependent):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, cols))
    if dependent and cols > 1:
        a[:, -1] = a[:, 0]
    b = rng.normal(size=(rows,) if rhs is None else (rows, rhs))
    with ember.config.override(enable_x64=True):
        x, residuals, rank, s = la.lstsq(a, b)
        numpy_residuals = la.lstsq(a, b, numpy_resid=True).residuals
    e_x, e_residuals, e_rank, e_s = np.linalg.lstsq(a, b)
    _close(x, e_x, rtol=1e-9, atol=1e-9)
    assert int(rank) == e_rank
    _close(s, e_s, rtol=1e-9, atol=1e-9)
    _close(numpy_residuals, e_residuals, rtol=1e-9, atol=1e-9)
    expected = ((a @ e_x - b) ** 2).sum(axis=0)
    _close(residuals, np.reshape(expected, (-1,)), rtol=1e-9, atol=1e-9)  # always, as JAX


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf])
def test_cond_matches_numpy(p):
    a = np.random.default_rng(3).normal(size=(2, 3, 3))
    with ember.config.override(enable_x64=True):
        _close(la.cond(a, p), np.linalg.cond(a, p), rtol=1e-9)
        singular = la.cond(np.array([[1.0, 0.0], [0.0, 0.0]]), p)
    assert float(singular) == (0.0 if p == -2 else np.inf)


def test_tensorinv_tensorsolve_match_numpy():
    rng = np.random.default_rng(0)
    t = rng.normal(size=(4, 6, 8, 3))
    a = rng.normal(size=(6, 4, 2, 3, 4))
    b = rng.normal(size=(6, 4))
    with ember.config.override(enable_x64=True):
        _close(la.tensorinv(t, 2), np.linalg.tensorinv(t, 2), rtol=1e-9)
        _close(la.tensorsolve(a, b), np.linalg.tensorsolve(a, b), rtol=1e-9)
        moved = a.transpose(2, 0, 3, 1, 4)
        _close(la.tensorsolve(moved, b, axes=(0, 2)),
               np.linalg.tensorsolve(moved, b, axes=(0, 2)), rtol=1e-9)
    with pytest.raises(EmberValueError, match="equal products to make a square matrix, got 6 "
                                              "and 4"):
        la.tensorinv(np.ones((2, 3, 4)), 2)
    with pytest.raises(EmberValueError, match=r"b must be 1-D or 2-D with 3 rows"):
        la.lstsq(np.ones((3, 2)), np.ones(4))


def test_lstsq_and_svd_gradients_match_jax():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(1)
    a = rng.normal(size=(5, 3)).astype(np.float32)
    b = rng.normal(size=5).astype(np.float32)

    def loss(linalg):
        return lambda m: ((linalg.lstsq(m, b)[0] ** 2).sum()
                          + linalg.svd(m, full_matrices=False)[1].sum())

    with ember.config.override(backend="reference"):
        ours = ember.jit(ember.grad(loss(la)))(a)
    _close(ours, np.asarray(jax.grad(loss(jax.numpy.linalg))(a)), rtol=1e-4, atol=1e-5)


# --- eig / eigvals (general matrices) ---------------------------------------------------

def _sorted_eigenvalues(w):
    w = np.asarray(w)
    return w[np.lexsort((w.imag.round(4), w.real.round(4)))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_eig_and_eigvals_match_numpy(dtype, batch, x64):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((*batch, 5, 5))
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(a.shape)
    a = a.astype(dtype)
    w, v = la.eig(a)
    complex_dtype = np.result_type(dtype, np.complex64)
    assert np.asarray(w).dtype == complex_dtype and np.asarray(v).dtype == complex_dtype
    tolerance = 1e-4 if np.finfo(dtype).bits <= 64 and dtype != np.float64 else 1e-10
    residual = np.asarray(a) @ np.asarray(v) - np.asarray(v) * np.asarray(w)[..., None, :]
    assert np.abs(residual).max() < tolerance * 10
    np.testing.assert_allclose(np.linalg.norm(np.asarray(v), axis=-2), 1.0, rtol=tolerance)
    for got, want in zip(np.reshape(la.eigvals(a), (-1, 5)),
                         np.reshape(np.linalg.eigvals(a), (-1, 5))):
        np.testing.assert_allclose(_sorted_eigenvalues(got), _sorted_eigenvalues(want),
                                   rtol=tolerance * 10, atol=tolerance * 10)


def test_float32_eig_is_lapacks_sgeev():
    """float32 runs LAPACK's sgeev, as SciPy, ATen and JAX: a real eigenvector's sign is
    whatever geev's iteration left (no convention fixes it), and dgeev's often differs."""
    linalg = pytest.importorskip("scipy.linalg")
    rng = np.random.default_rng(8)
    for n in (2, 5, 9):
        a = rng.standard_normal((4, n, n)).astype(np.float32)
        w, v = la.eig(a)
        for k in range(len(a)):
            want_w, want_v = linalg.eig(a[k])  # (sgeev: same order and normalization)
            np.testing.assert_allclose(np.asarray(w)[k], want_w, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(np.asarray(v)[k], want_v, rtol=1e-5, atol=1e-5)


def test_left_eigenvectors():
    a = np.random.default_rng(6).standard_normal((4, 4))
    w, vl, vr = ember.lax.linalg.eig(a)
    w, vl = np.asarray(w), np.asarray(vl)
    np.testing.assert_allclose(vl.conj().T @ a, w[:, None] * vl.conj().T, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(vl, axis=0), 1.0, rtol=1e-5)


@pytest.mark.parametrize("backend", [b for b in ("cpu", "opencl")
                                     if b in ember.runtime.devices.available_backends()])
def test_eig_under_jit_and_vmap(backend):
    a = np.random.default_rng(7).standard_normal((3, 4, 4)).astype(np.float32)
    got = ember.jit(ember.vmap(la.eigvals), backend=backend)(a)
    np.testing.assert_allclose(np.asarray(got), np.asarray(la.eigvals(a)), rtol=1e-5, atol=1e-5)


def test_eig_errors():
    with pytest.raises(EmberValueError, match="eig needs square matrices"):
        la.eig(np.ones((2, 3)))
    with pytest.raises(Exception, match="eig is not differentiable"):
        ember.grad(lambda a: la.eigvals(a).real.sum())(np.eye(3, dtype=np.float32))
