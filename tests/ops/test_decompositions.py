"""ember.lax.linalg decompositions: defining identities on generated matrices, errors."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberTypeError, EmberValueError
from ember.lax import linalg
from ember.test_util import check_grads, check_vmap

BATCH = st.lists(st.integers(1, 2), max_size=2).map(tuple)


def random(seed, shape, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def spd(seed, batch, n, dtype=np.float64):
    a = random(seed, (*batch, n, n), dtype)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)


def close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@given(BATCH, st.integers(1, 5), st.integers(0, 99), st.sampled_from([np.float64, np.complex128]))
def test_cholesky_reconstructs(batch, n, seed, dtype):
    a = spd(seed, batch, n, dtype)
    with ember.config.override(enable_x64=True):
        factor = np.asarray(linalg.cholesky(a))
    assert np.allclose(factor, np.tril(factor))
    close(factor @ np.conj(np.swapaxes(factor, -1, -2)), a)


def test_cholesky_not_positive_definite_gives_nan_per_matrix():
    good = np.eye(2, dtype=np.float32)
    out = np.asarray(linalg.cholesky(np.stack([good, -good])))
    np.testing.assert_array_equal(out[0], good)
    assert np.isnan(out[1]).all()


@given(BATCH, st.integers(0, 5), st.integers(0, 5), st.integers(0, 99))
def test_lu_reconstructs_with_pivots_and_permutation(batch, m, n, seed):
    x = random(seed, (*batch, m, n))
    with ember.config.override(enable_x64=True):
        packed, pivots, perm = map(np.asarray, linalg.lu(x))
    k = min(m, n)
    assert pivots.shape == (*batch, k) and perm.shape == (*batch, m)
    assert pivots.dtype == perm.dtype == np.int32
    lower = np.tril(packed, -1)[..., :, :k] + np.eye(m, k)
    upper = np.triu(packed)[..., :k, :]
    close(lower @ upper, np.take_along_axis(x, perm[..., None], axis=-2))
    assert (np.abs(np.tril(packed, -1)) <= 1 + 1e-12).all()  # partial pivoting
    # the permutation is the pivots' row swaps applied in order
    count = math.prod(batch)  # (-1 is ambiguous for an empty matrix)
    flat_piv, flat_perm = pivots.reshape(count, k), perm.reshape(count, m)
    for piv, expected in zip(flat_piv, flat_perm):
        rows = np.arange(m)
        for i, p in enumerate(piv):
            rows[[i, p]] = rows[[p, i]]
        np.testing.assert_array_equal(rows, expected)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solve_all_variants(x64, left_side, lower, transpose_a, unit_diagonal):
    a = random(0, (2, 4, 4), np.complex128) + 4 * np.eye(4)
    b = random(1, (2, 4, 3) if left_side else (2, 3, 4), np.complex128)
    for conjugate_a in (False, True):
        x = np.asarray(linalg.triangular_solve(
            a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
            conjugate_a=conjugate_a, unit_diagonal=unit_diagonal))
        t = np.tril(a) if lower else np.triu(a)
        if unit_diagonal:
            t = np.where(np.eye(4, dtype=bool), 1, t)
        op = np.conj(t) if conjugate_a else t
        op = np.swapaxes(op, -1, -2) if transpose_a else op
        close(op @ x if left_side else x @ op, b)


@given(BATCH, st.integers(1, 5), st.integers(1, 5), st.booleans(), st.integers(0, 99),
       st.sampled_from([np.float64, np.complex128]))
def test_qr_reconstructs(batch, m, n, full, seed, dtype):
    x = random(seed, (*batch, m, n), dtype)
    with ember.config.override(enable_x64=True):
        q, r = map(np.asarray, linalg.qr(x, full_matrices=full))
    k = m if full else min(m, n)
    assert q.shape == (*batch, m, k) and r.shape == (*batch, k, n)
    close(q @ r, x)
    close(np.conj(np.swapaxes(q, -1, -2)) @ q, np.broadcast_to(np.eye(k), (*batch, k, k)))
    close(r, np.triu(r))


@given(BATCH, st.integers(1, 5), st.integers(0, 99), st.sampled_from([np.float64,
                                                                      np.complex128]))
def test_eigh_diagonalizes(batch, n, seed, dtype):
    a = random(seed, (*batch, n, n), dtype)
    with ember.config.override(enable_x64=True):
        v, w = map(np.asarray, linalg.eigh(a))  # symmetrizes the input
    hermitian = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    assert w.dtype == np.float64 and (np.diff(w, axis=-1) >= -1e-12).all()
    close(hermitian @ v, v * w[..., None, :], 1e-8)


def test_eigh_reads_only_the_requested_triangle():
    a = np.array([[2.0, 100.0], [1.0, 2.0]], np.float32)
    _, w_lower = linalg.eigh(a, lower=True, symmetrize_input=False)
    _, w_upper = linalg.eigh(a, lower=False, symmetrize_input=False)
    close(w_lower, [1.0, 3.0], 1e-5)
    close(w_upper, [-98.0, 102.0], 1e-4)


def test_jit_matches_eager():
    a = spd(0, (2,), 3).astype(np.float32)
    for fn in (linalg.cholesky, lambda x: linalg.lu(x)[0], lambda x: linalg.qr(x)[1],
               lambda x: linalg.eigh(x)[1],
               lambda x: linalg.triangular_solve(x, x, left_side=True, lower=True)):
        close(ember.jit(fn)(a), fn(a), 1e-5)


def test_errors():
    with pytest.raises(EmberValueError, match=r"cholesky needs square matrices, got shape "
                                              r"\(2, 3\)"):
        linalg.cholesky(np.zeros((2, 3), np.float32), symmetrize_input=False)
    with pytest.raises(EmberTypeError, match="lu needs a floating or complex operand, got int32"):
        linalg.lu(np.zeros((2, 2), np.int32))
    with pytest.raises(EmberValueError, match=r"qr needs a matrix .* shape \(3,\)"):
        linalg.qr(np.zeros(3, np.float32))
    with pytest.raises(EmberValueError, match=r"b.shape\[-2\] == 3"):
        linalg.triangular_solve(np.eye(3, dtype=np.float32), np.zeros((2, 3), np.float32),
                                left_side=True)
    with pytest.raises(EmberTypeError, match="a's dtype float32"):
        linalg.triangular_solve(np.eye(3, dtype=np.float32), np.zeros((3, 3), np.int32))
    with pytest.raises(EmberValueError, match="pivoting"):
        linalg.qr(np.eye(2, dtype=np.float32), pivoting=True)
    with pytest.raises(EmberValueError, match="subset_by_index"):
        linalg.eigh(np.eye(2, dtype=np.float32), subset_by_index=(0, 1))


# --- transformation rules ------------------------------------------------------------------

DTYPES = [np.float64, np.complex128]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("symmetrize", [True, False])
def test_cholesky_gradients(x64, dtype, symmetrize):
    a = spd(0, (2,), 3, dtype)
    check_grads(lambda x: linalg.cholesky(x, symmetrize_input=symmetrize), (a,), order=2)


def test_cholesky_gradient_follows_what_is_read(x64):
    """Symmetrizing reads both triangles equally, so the gradient is symmetric; without it
    only the lower triangle is read, so the gradient lives there."""
    a = spd(1, (), 3)

    def total(symmetrize):
        return ember.grad(lambda x: lax.reduce_sum(
            linalg.cholesky(x, symmetrize_input=symmetrize), (0, 1)))(a)

    symmetric, lower = np.asarray(total(True)), np.asarray(total(False))
    np.testing.assert_allclose(symmetric, symmetric.T, atol=1e-12)
    np.testing.assert_array_equal(np.triu(lower, 1), 0)
    np.testing.assert_allclose(np.tril(symmetric, -1) * 2 + np.diag(np.diag(symmetric)),
                               lower, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_gradients(x64, dtype):
    check_grads(lambda x: linalg.lu(x)[0], (random(0, (2, 4, 4), dtype),), order=2)


def test_lu_gradient_of_rectangular_input_is_an_error(x64):
    with pytest.raises(EmberValueError, match=r"square matrices only, got shape \(3, 2\)"):
        ember.jvp(lambda x: linalg.lu(x)[0], (np.ones((3, 2)),), (np.ones((3, 2)),))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,full", [((5, 3), False), ((4, 4), True), ((4, 4), False)])
def test_qr_gradients(x64, dtype, shape, full):
    # eps below the default: second differences of Q are large for these random matrices
    check_grads(lambda x: linalg.qr(x, full_matrices=full), (random(0, shape, dtype),),
                order=2, eps=1e-5)


def test_qr_gradient_of_wide_input_is_an_error(x64):
    with pytest.raises(EmberValueError, match=r"m >= n .* shape \(2, 3\)"):
        ember.jvp(lambda x: linalg.qr(x)[1], (np.ones((2, 3)),), (np.ones((2, 3)),))


def _weighted_projection(v):
    """v diag(1, 2, ..., n) v^H: smooth in x, blind to each eigenvector's sign / phase."""
    n = v.shape[-1]
    weights = lax.broadcast_in_dim(np.arange(1.0, n + 1).astype(v.dtype), v.shape, (v.ndim - 1,))
    batch = tuple(range(v.ndim - 2))
    other = lax.conj(v) if np.issubdtype(v.dtype, np.complexfloating) else v
    return lax.dot_general(lax.mul(v, weights), other, (((v.ndim - 1,), (v.ndim - 1,)),
                                                        (batch, batch)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_eigh_gradients(x64, dtype, lower):
    a = random(0, (2, 4, 4), dtype)

    def f(x):
        v, w = linalg.eigh(x, lower=lower, symmetrize_input=False)
        return _weighted_projection(v), w

    check_grads(f, (a,), order=1)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, True)])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solve_gradients(x64, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    a = random(0, (2, 3, 3), np.complex128) + 3 * np.eye(3)
    b = random(1, (2, 3, 2) if left_side else (2, 2, 3), np.complex128)
    check_grads(lambda x, y: linalg.triangular_solve(
        x, y, left_side=left_side, lower=lower, transpose_a=transpose_a,
        conjugate_a=conjugate_a, unit_diagonal=unit_diagonal), (a, b), order=2)


@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_matches_loop(in_axis):
    a = np.moveaxis(spd(0, (2, 3), 3), 0, in_axis)  # batch of 2, each a stack of 3
    for fn in (linalg.cholesky, linalg.lu, lambda x: linalg.qr(x, full_matrices=False),
               linalg.eigh):
        check_vmap(fn, (a,), in_axis, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 1), (2, 0)])
def test_triangular_solve_vmap_matches_loop(in_axes):
    rng = np.random.default_rng(0)
    shapes = [(2, 4, 4), (2, 4, 3)]
    args = [rng.standard_normal(s) + 4 * np.eye(s[-1])[: s[-2]] if i == 0 else
            rng.standard_normal(s) for i, s in enumerate(shapes)]
    args = [a if ax is None else np.stack([a, 2 * a], axis=ax) for a, ax in zip(args, in_axes)]
    check_vmap(lambda x, y: linalg.triangular_solve(x, y, left_side=True, lower=True),
               args, in_axes, rtol=1e-10, atol=1e-10)


# --- svd and lu_pivots_to_permutation --------------------------------------------------------

@given(BATCH, st.integers(1, 5), st.integers(1, 5), st.booleans(), st.integers(0, 99),
       st.sampled_from([np.float64, np.complex128]))
def test_svd_reconstructs(batch, m, n, full, seed, dtype):
    x = random(seed, (*batch, m, n), dtype)
    with ember.config.override(enable_x64=True):
        u, s, vh = map(np.asarray, linalg.svd(x, full_matrices=full))
        values = np.asarray(linalg.svd(x, compute_uv=False))
    k = min(m, n)
    assert u.shape == (*batch, m, m if full else k) and vh.shape == (*batch, n if full else k, n)
    assert s.dtype == np.float64 and (np.diff(s, axis=-1) <= 1e-12).all()
    close(u[..., :k] * s[..., None, :] @ vh[..., :k, :], x)
    close(values, s)


def _sv_projections(full=False):
    def f(x):
        u, s, vh = linalg.svd(x, full_matrices=full)
        return s, _weighted_projection(u), _weighted_projection(_adjoint(vh))
    return f


def _adjoint(x):
    xt = lax.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))
    return lax.conj(xt) if np.issubdtype(x.dtype, np.complexfloating) else xt


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 3, 5)])
def test_svd_gradients(x64, dtype, shape):
    x = random(0, shape, dtype)
    check_grads(_sv_projections(), (x,), order=1)
    check_grads(lambda v: linalg.svd(v, compute_uv=False), (x,), order=2)


def test_svd_gradient_of_full_factors_needs_a_square_matrix(x64):
    check_grads(_sv_projections(full=True), (random(0, (3, 3)),), order=1)
    with pytest.raises(EmberValueError, match=r"full_matrices=True .* \(4, 3\)"):
        ember.jvp(lambda v: linalg.svd(v)[0], (np.ones((4, 3)),), (np.ones((4, 3)),))


def test_svd_vmap_matches_loop():
    check_vmap(linalg.svd, (random(0, (3, 4, 2)),), 1, rtol=1e-10, atol=1e-10)


def test_lu_pivots_to_permutation_matches_lu():
    x = random(3, (2, 5, 5)).astype(np.float32)
    _, pivots, perm = linalg.lu(x)
    np.testing.assert_array_equal(np.asarray(linalg.lu_pivots_to_permutation(pivots, 5)),
                                  np.asarray(perm))
    extended = linalg.lu_pivots_to_permutation(np.array([1, 1], np.int32), 4)
    np.testing.assert_array_equal(np.asarray(extended), [1, 0, 2, 3])
    check_vmap(lambda p: linalg.lu_pivots_to_permutation(p, 5), (np.asarray(pivots),), 0)
    with pytest.raises(EmberValueError, match="permutation_size 1 is smaller than the number "
                                              "of pivots 2"):
        linalg.lu_pivots_to_permutation(np.array([1, 1], np.int32), 1)
