"""ember.scipy.special against SciPy (values, float64 and float32), numerical gradients,
jit, and JAX where installed."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sps

import ember
from ember.scipy import special
from ember.test_util import check_grads

X = np.array([-7.5, -2.0, -0.3, 0.0, 0.4, 1.0, 3.5, 9.0])
POSITIVE = np.array([0.05, 0.5, 1.0, 2.5, 7.0, 30.0])
UNIT = np.array([1e-12, 1e-4, 0.02, 0.3, 0.5, 0.77, 0.999, 1 - 1e-9])

# name -> (scipy reference, inputs)
UNARY = {
    "erf": (sps.erf, X), "erfc": (sps.erfc, X),
    "erfinv": (sps.erfinv, 2 * UNIT - 1), "gammaln": (sps.gammaln, POSITIVE),
    "digamma": (sps.digamma, POSITIVE), "expit": (sps.expit, X), "logit": (sps.logit, UNIT),
    "ndtr": (sps.ndtr, X), "ndtri": (sps.ndtri, UNIT), "log_ndtr": (sps.log_ndtr, X),
    "entr": (sps.entr, np.concatenate([POSITIVE, [0.0, -1.0]])),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_scipy_float64(name, x64):
    reference, x = UNARY[name]
    np.testing.assert_allclose(getattr(special, name)(x), reference(x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_scipy_float32(name):
    reference, x = UNARY[name]
    if name in ("ndtri", "logit"):  # 1 - 1e-9 is 1 in float32
        x = x[:-1]
    x32 = x.astype(np.float32)
    got = np.asarray(getattr(special, name)(x32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, reference(x32.astype(np.float64)), rtol=3e-5, atol=1e-6)


def test_ndtri_and_log_ndtr_far_tails(x64):
    p = np.array([1e-300, 1e-100, 1e-30, 1 - 1e-16])
    np.testing.assert_allclose(special.ndtri(p), sps.ndtri(p), rtol=1e-12)
    x = np.array([-1e3, -60.0, -38.0, -21.0, -19.0, 7.9, 12.0, 40.0])
    # Just past the series' threshold, the default 3 terms leave about 1e-11 (as JAX).
    np.testing.assert_allclose(special.log_ndtr(x), sps.log_ndtr(x), rtol=1e-10, atol=0)
    np.testing.assert_allclose(special.log_ndtr(x, series_order=12), sps.log_ndtr(x),
                               rtol=1e-13, atol=0)
    np.testing.assert_array_equal(special.ndtri(np.array([0.0, 1.0])), [-np.inf, np.inf])
    assert np.isnan(np.asarray(special.ndtri(np.array([-0.5, 1.5])))).all()


@pytest.mark.parametrize("name", ["betaln", "xlogy", "xlog1py"])
def test_binary_matches_scipy(name, x64):
    a = np.array([0.0, 0.5, 1.5, 3.0, 10.0])[:, None]
    b = np.array([0.25, 1.0, 2.0, 6.0])[None, :]
    reference = getattr(sps, name)
    np.testing.assert_allclose(getattr(special, name)(a, b), reference(a, b), rtol=1e-12,
                               atol=1e-14)


SHAPES = np.array([0.1, 0.5, 1.0, 2.5, 10.0, 50.0, 300.0])[:, None]


def test_incomplete_gamma_matches_scipy(x64):
    x = np.array([0.0, 1e-3, 0.3, 1.0, 3.0, 9.0, 11.0, 60.0, 290.0, 320.0])
    np.testing.assert_allclose(special.gammainc(SHAPES, x), sps.gammainc(SHAPES, x),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(special.gammaincc(SHAPES, x), sps.gammaincc(SHAPES, x),
                               rtol=1e-12, atol=1e-300)
    invalid = special.gammainc(np.array([-1.0, 1.0, 1.0]), np.array([1.0, -1.0, np.nan]))
    assert np.isnan(np.asarray(invalid)).all()


def test_incomplete_beta_matches_scipy(x64):
    b = np.array([0.2, 1.0, 3.0, 40.0, 200.0])[None, :, None]
    x = np.array([0.0, 1e-4, 0.1, 0.5, 0.77, 0.999, 1.0])
    np.testing.assert_allclose(special.betainc(SHAPES[1:, :, None], b, x),
                               sps.betainc(SHAPES[1:, :, None], b, x), rtol=1e-11, atol=1e-13)
    assert np.isnan(np.asarray(special.betainc(1.0, 2.0, np.array([-0.1, 1.1])))).all()


def test_incomplete_gamma_and_beta_gradients_in_every_argument(x64):
    """Through the fixed-length loops: in the shapes too (JAX's betainc has none)."""
    for x in (0.7, 4.0):  # the series, and the continued fraction
        check_grads(special.gammainc, (np.float64(2.5), np.float64(x)), order=1, rtol=1e-6)
        check_grads(special.gammaincc, (np.float64(2.5), np.float64(x)), order=1, rtol=1e-6)
    for x in (0.2, 0.8):  # either side of the mean
        check_grads(special.betainc, (np.float64(2.5), np.float64(1.5), np.float64(x)),
                    order=1, rtol=1e-6)


def test_xlogy_is_zero_at_zero_even_where_log_is_not_finite(x64):
    np.testing.assert_array_equal(special.xlogy(0.0, 0.0), 0.0)
    np.testing.assert_array_equal(special.xlog1py(0.0, -1.0), 0.0)


def test_logsumexp_softmax_match_scipy(x64):
    a = np.random.default_rng(0).normal(size=(3, 4)) * 30
    b = np.random.default_rng(1).uniform(0.1, 2, size=(3, 4))
    for axis in (None, 0, 1, (0, 1)):
        np.testing.assert_allclose(special.logsumexp(a, axis=axis),
                                   sps.logsumexp(a, axis=axis), rtol=1e-12)
        np.testing.assert_allclose(special.logsumexp(a, axis=axis, b=b),
                                   sps.logsumexp(a, axis=axis, b=b), rtol=1e-12)
        np.testing.assert_allclose(special.softmax(a, axis=axis), sps.softmax(a, axis=axis),
                                   rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(special.log_softmax(a, axis=axis),
                                   sps.log_softmax(a, axis=axis), rtol=1e-12)
    out, sign = special.logsumexp(a, b=-b, axis=1, return_sign=True)
    ref_out, ref_sign = sps.logsumexp(a, b=-b, axis=1, return_sign=True)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12)
    np.testing.assert_array_equal(sign, ref_sign)


GRAD_POINTS = {
    "erf": [-1.2, 0.3], "erfc": [-0.4, 1.1], "erfinv": [-0.6, 0.2, 0.9],
    "gammaln": [0.7, 4.2], "digamma": [0.6, 3.3], "expit": [-2.0, 0.5],
    "logit": [0.1, 0.8], "ndtr": [-3.0, 0.4], "ndtri": [1e-5, 0.3, 0.95],
    "log_ndtr": [-30.0, -3.0, 0.2, 6.0], "entr": [0.2, 2.0],
}


@pytest.mark.parametrize("name", sorted(GRAD_POINTS))
def test_unary_gradients(name, x64):
    fn = getattr(special, name)
    for x in GRAD_POINTS[name]:
        check_grads(fn, (np.float64(x),), order=2, rtol=1e-5, atol=1e-8, eps=1e-6 * max(
            1.0, abs(x)) if name != "ndtri" else 1e-9)


@pytest.mark.parametrize("name", ["betaln", "xlogy", "xlog1py"])
def test_binary_gradients(name, x64):
    fn = getattr(special, name)
    check_grads(fn, (np.array([0.7, 2.5]), np.array([1.5, 0.4])), order=2, rtol=1e-5,
                atol=1e-8)


def test_xlogy_gradient_at_zero_is_log_y(x64):
    """As JAX: d/dx xlogy(x, y) = log(y) also at x = 0 (the where would give 0)."""
    np.testing.assert_allclose(ember.grad(special.xlogy)(0.0, 3.0), np.log(3.0))
    np.testing.assert_allclose(ember.grad(special.xlog1py)(0.0, 3.0), np.log1p(3.0))


def test_log_ndtr_gradient_in_the_far_tail(x64):
    """pdf / cdf: finite where both underflow."""
    x = np.array([-200.0, -40.0])
    grad = ember.vmap(ember.grad(special.log_ndtr))(x)
    np.testing.assert_allclose(grad, np.exp(
        -0.5 * x**2 - 0.5 * np.log(2 * np.pi) - sps.log_ndtr(x)), rtol=1e-10)


def test_softmax_gradient(x64):
    a = np.random.default_rng(2).normal(size=(2, 3))
    check_grads(lambda x: special.softmax(x, axis=1), (a,), order=1, rtol=1e-6)
    check_grads(lambda x: special.logsumexp(x), (a,), order=2, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_under_jit(name, x64):
    _, x = UNARY[name]
    fn = getattr(special, name)
    np.testing.assert_allclose(ember.jit(fn)(x), fn(x), rtol=1e-13, atol=1e-300)


def test_matches_jax(x64):
    jax = pytest.importorskip("jax")
    jsp = pytest.importorskip("jax.scipy.special")
    with jax.enable_x64(True):
        for name, (_, x) in UNARY.items():
            np.testing.assert_allclose(getattr(special, name)(x), getattr(jsp, name)(x),
                                       rtol=1e-10, atol=1e-14, err_msg=name)
            grad_ours = ember.vmap(ember.grad(getattr(special, name)))(x)
            grad_jax = jax.vmap(jax.grad(getattr(jsp, name)))(x)
            finite = np.isfinite(np.asarray(grad_jax))
            np.testing.assert_allclose(np.asarray(grad_ours)[finite],
                                       np.asarray(grad_jax)[finite], rtol=1e-8,
                                       err_msg=f"grad {name}")
        a = np.array([0.0, 0.5, 3.0])
        for name in ("betaln", "xlogy", "xlog1py"):
            np.testing.assert_allclose(getattr(special, name)(a, 2.0),
                                       getattr(jsp, name)(a, 2.0), rtol=1e-12)


def test_reachable_as_an_attribute_of_ember():
    """As ``jax.scipy``: ``import ember`` then ``ember.scipy.special``."""
    assert ember.scipy.special is special
    assert {"linalg", "optimize", "signal", "special", "stats"} <= set(dir(ember.scipy))
