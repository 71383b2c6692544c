"""gamma, beta, factorial, comb, poch, multigammaln, zeta, polygamma, the modified
Bessel functions i0 / i1 (and their scaled forms) and rel_entr / kl_div: against SciPy
(float64 and float32, with the special values at poles and edges), numerical gradients,
jit, and JAX where installed."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.scipy import special
from ember.test_util import check_grads

sps = pytest.importorskip("scipy.special")

X = np.array([-7.5, -2.0, -1.0, -0.3, -0.0, 0.0, 0.4, 1.0, 3.5, 9.0, 30.0, 170.5])
BESSEL_X = np.array([-50.0, -7.5, -0.3, 0.0, 1e-3, 0.4, 1.0, 3.5, 9.0, 29.9, 30.1, 35.0, 700.0])
ORDERS = np.array([0.5, 1.0, 2.0, 3.5, 10.0])[:, None]
SHIFTS = np.array([0.1, 0.5, 1.0, 7.0, 1e3, -0.5, -2.0, 0.0])[None, :]

# name -> (ember function, scipy function, arguments)
CASES = {
    "gamma": (special.gamma, sps.gamma, (X,)),
    "gammasgn": (special.gammasgn, sps.gammasgn, (X,)),
    "factorial": (special.factorial, sps.factorial, (np.array([-1.0, 0, 3.5, 10, 20]),)),
    "beta": (special.beta, sps.beta, (np.array([0.5, -1.5, 2.0, 30.0]),
                                      np.array([2.0, 0.7, -3.5, 0.1]))),
    "comb": (special.comb, sps.comb, (np.array([5.0, 5, -1, 5, 10, 60.5]),
                                      np.array([2.0, 6, 1, -1, 3, 7]))),
    "comb with repetition": (lambda n, k: special.comb(n, k, repetition=True),
                             lambda n, k: sps.comb(n, k, repetition=True),
                             (np.array([5.0, 3, 0]), np.array([3.0, 0, 2]))),
    "poch": (special.poch, sps.poch, (np.array([1.5, 2.0, 0.3]), np.array([0.0, 3.0, 2.5]))),
    "multigammaln": (lambda a: special.multigammaln(a, 3), lambda a: sps.multigammaln(a, 3),
                     (np.array([3.0, 5.5, 40.0]),)),
    "zeta": (special.zeta, sps.zeta, (ORDERS, SHIFTS)),
    "riemann zeta": (special.zeta, sps.zeta, (np.array([1.5, 2.0, 4.0, 20.0]),)),
    "polygamma": (special.polygamma, sps.polygamma,
                  (np.array([0, 1, 2, 3, 1])[:, None],
                   np.array([0.1, 2.5, 10.0, -0.5, -2.5])[None])),
    "i0": (special.i0, sps.i0, (BESSEL_X[1:-1],)),
    "i1": (special.i1, sps.i1, (BESSEL_X[1:-1],)),
    "i0e": (special.i0e, sps.i0e, (BESSEL_X,)),
    "i1e": (special.i1e, sps.i1e, (BESSEL_X,)),
    "rel_entr": (special.rel_entr, sps.rel_entr, (np.array([0.0, 1, 2, -1, 0, 0.3]),
                                                  np.array([1.0, 0, 3, 1, -1, 0.3]))),
    "kl_div": (special.kl_div, sps.kl_div, (np.array([0.0, 1, 2, -1, 1, 0.3]),
                                            np.array([1.0, 0, 3, 1, 2, 0.7]))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_scipy_float64(name, x64):
    ours, theirs, args = CASES[name]
    got, want = np.asarray(ours(*args)), theirs(*args)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=5e-14, atol=1e-300)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_scipy_float32(name):
    ours, theirs, args = CASES[name]
    args32 = tuple(a.astype(np.float32) if a.dtype.kind == "f" else a for a in args)
    got = np.asarray(ours(*args32))
    assert got.dtype == np.float32
    want = theirs(*(a.astype(np.float64) if a.dtype.kind == "f" else a for a in args32))
    finite = np.isfinite(want) & (np.abs(want) < 3e38)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    # exp(lgamma) loses |lgamma| ulps: 1e-4 covers the largest here (Gamma(30)).
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-30)


GRADIENTS = {
    "gamma": (special.gamma, (np.array([-1.5, 0.6, 4.2]),)),
    "beta": (special.beta, (np.array([0.7, 2.5]), np.array([1.5, 0.4]))),
    "factorial": (special.factorial, (np.array([0.5, 3.2]),)),
    "comb": (special.comb, (np.array([7.5, 10.0]), np.array([2.5, 3.0]))),
    "zeta in q": (lambda q: special.zeta(np.array([2.0, 3.5]), q), (np.array([0.7, 5.0]),)),
    "zeta in x": (lambda x: special.zeta(x, np.array([0.7, 5.0])), (np.array([2.0, 3.5]),)),
    "polygamma": (lambda x: special.polygamma(np.array([1, 2]), x), (np.array([0.8, 3.0]),)),
    "i0": (special.i0, (np.array([-3.0, 0.2, 2.0, 31.0]),)),
    "i1": (special.i1, (np.array([-3.0, 0.2, 2.0, 31.0]),)),
    "i0e": (special.i0e, (np.array([-3.0, 0.2, 2.0, 31.0]),)),
    "i1e": (special.i1e, (np.array([-3.0, 0.2, 2.0, 31.0]),)),
    "rel_entr": (special.rel_entr, (np.array([0.3, 2.0]), np.array([0.6, 0.5]))),
    "kl_div": (special.kl_div, (np.array([0.3, 2.0]), np.array([0.6, 0.5]))),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients(name, x64):
    fn, args = GRADIENTS[name]
    check_grads(fn, args, order=2, rtol=1e-5, atol=1e-8, eps=1e-6)


def test_bessel_slopes_are_closed_forms(x64):
    x = np.array([-2.0, 0.0, 0.5, 40.0])
    np.testing.assert_allclose(ember.vmap(ember.grad(special.i0))(x), sps.i1(x), rtol=1e-13)
    np.testing.assert_allclose(ember.vmap(ember.grad(special.i1e))(x),
                               [*(sps.i0e(x[[0]]) - sps.i1e(x[[0]]) * (-1 + 1 / x[[0]])), 0.5,
                                *(sps.i0e(x[2:]) - sps.i1e(x[2:]) * (1 + 1 / x[2:]))],
                               rtol=1e-12)


def test_under_jit_and_errors(x64):
    for name in ("zeta", "i1e", "gamma", "polygamma"):
        ours, _, args = CASES[name]
        np.testing.assert_allclose(ember.jit(ours)(*args), ours(*args), rtol=1e-13)
    with pytest.raises(TypeError, match="`n` to polygamma must be of integer type"):
        special.polygamma(1.0, 2.0)
    with pytest.raises(NotImplementedError, match="exact=True"):
        special.factorial(3, exact=True)
    with pytest.raises(TypeError, match="complex"):
        special.gamma(np.array([1j]))


def test_matches_jax(x64):
    jax = pytest.importorskip("jax")
    jsp = pytest.importorskip("jax.scipy.special")
    with jax.enable_x64(True):
        for name, (ours, _, args) in CASES.items():
            if name in ("comb with repetition", "multigammaln", "riemann zeta"):
                continue  # (JAX: other signatures, or no Riemann zeta)
            jax_name = name.split(" ")[0]
            want = np.asarray(getattr(jsp, jax_name)(*args))
            got = np.asarray(ours(*args))
            both = np.isfinite(want) & np.isfinite(got)
            # (JAX is the less accurate one where they differ: SciPy is checked to 5e-14 above)
            np.testing.assert_allclose(got[both], want[both], rtol=1e-8, err_msg=name)


# zeta away from q > 0: negative non-integer q (SciPy's value for an integer order, NaN for
# any other), the poles at the integers q <= 0, and the orders x = inf and huge x; on every
# backend present (the `backend` fixture), compiled.
ZETA_X, ZETA_Q = np.meshgrid(
    np.concatenate([np.arange(2.0, 21.0), [1.0001, 2.5, 7.25, 33.3, 50.0]]),
    np.concatenate([np.linspace(-5, 10, 61), [-1e-9, -0.999, -4.999999, -37.3, -1000.7]]),
    indexing="ij")


def test_zeta_negative_q_matches_scipy(backend, x64):
    got, want = np.asarray(ember.jit(special.zeta)(ZETA_X, ZETA_Q)), sps.zeta(ZETA_X, ZETA_Q)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    x, q, got, want = ZETA_X[finite], ZETA_Q[finite], got[finite], want[finite]
    assert (q < -1).any()  # (where the old zeta was NaN)
    # For q < 0 an odd order's terms cancel (zeta(3, -4.5) = zeta(3, 5.5), from terms up
    # to 8): the error is bounded by the sum of |terms|, zeta(x, f) + zeta(x, 1 - f) with
    # f = q - floor(q), and SciPy's own error is of that size.
    f = q - np.floor(q)
    magnitude = np.where(q < 0, sps.zeta(x, f) + sps.zeta(x, 1 - f), np.abs(want))
    err = np.abs(got - want) / magnitude
    assert err.max() < 1e-14, (x[err.argmax()], q[err.argmax()])


def test_zeta_backends_agree(backend, x64):
    with ember.config.override(backend="reference"):
        expected = np.asarray(special.zeta(ZETA_X, ZETA_Q))
    got = np.asarray(ember.jit(special.zeta)(ZETA_X, ZETA_Q))
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zeta_infinite_and_huge_orders(backend, dtype, x64):
    q = np.array([-3.0, -2.5, -0.0, 0.3, 1.0, 1.5, 2.0, 1e6, np.inf, -np.inf, np.nan],
                 dtype)
    # inf at the poles and where some |q + k| < 1, 1 at q = 1, 0 above: the limit, and
    # SciPy's value at q = inf (SciPy gives NaN at the finite q > 1 here)
    want = np.array([np.inf, np.inf, np.inf, np.inf, 1.0, 0, 0, 0, 0, np.inf, np.nan])
    for order in (np.inf, 1e30):
        got = np.asarray(ember.jit(special.zeta)(np.full_like(q, order), q))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want, err_msg=str(order))
        scipy = sps.zeta(order, q.astype(np.float64))
        np.testing.assert_array_equal(got[~np.isnan(scipy)], scipy[~np.isnan(scipy)])


def test_zeta_float32_large_orders(backend):
    """float32 from x ~ 37, where the tail's rising factorial overflowed times a power
    that underflowed: NaN."""
    x, q = np.meshgrid(np.linspace(30, 60, 7, dtype=np.float32),
                       np.array([0.5, 1.0, 2.0, 7.5], np.float32), indexing="ij")
    got = np.asarray(ember.jit(special.zeta)(x, q))
    want = sps.zeta(x.astype(np.float64), q.astype(np.float64))
    normal = want > np.finfo(np.float32).tiny
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got[normal], want[normal], rtol=1e-5)
    np.testing.assert_allclose(got[~normal], want[~normal], atol=1e-44)
