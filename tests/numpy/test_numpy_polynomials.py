"""The poly* functions and vander against NumPy (float64) and JAX (static shapes: the
remainder's leading zeros, float results, gradients)."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberValueError


def _close(actual, expected, rtol=1e-9):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol)


COEFFICIENTS = st.integers(1, 5).flatmap(lambda n: st.lists(
    st.floats(-3, 3).filter(lambda v: abs(v) > 0.1), min_size=n, max_size=n)).map(np.array)


@given(p=COEFFICIENTS, q=COEFFICIENTS, m=st.integers(0, 3))
def test_arithmetic_matches_numpy(p, q, m):
    x = np.linspace(-2, 2, 5)
    with ember.config.override(enable_x64=True):
        results = [enp.polyval(p, x), enp.polyadd(p, q), enp.polysub(p, q), enp.polymul(p, q),
                   enp.polyder(p, m), enp.polyint(p, m), enp.polyint(p, m, k=1.5),
                   *enp.polydiv(p, q), enp.poly(p)]
    quotient, remainder = np.polydiv(p, q)
    expected = [np.polyval(p, x), np.polyadd(p, q), np.polysub(p, q), np.polymul(p, q),
                np.polyder(p, m), np.polyint(p, m), np.polyint(p, m, k=1.5), quotient,
                remainder, np.poly(p)]
    expected[8] = np.concatenate([np.zeros(len(p) - len(remainder)), remainder])  # as JAX
    for ours, theirs in zip(results, expected):
        _close(ours, theirs, rtol=1e-8)


def test_per_integration_constants_and_characteristic_polynomial():
    p = np.array([1.0, -2.0, 0.5])
    a = np.random.default_rng(0).normal(size=(4, 4))
    with ember.config.override(enable_x64=True):
        _close(enp.polyint(p, 2, k=np.array([1.0, 2.0])), np.polyint(p, 2, k=[1.0, 2.0]))
        _close(enp.poly(a), np.poly(a).real)  # no eigenvalues needed
        _close(enp.polydiv(p, np.array([1.0, 0.0]), trim_leading_zeros=True)[1],
               np.polydiv(p, [1.0, 0.0])[1])
    assert enp.polyder(np.array([1, 2, 3])).dtype == np.float32  # as JAX
    assert enp.polyval(np.array([1, 2, 3]), 2) == 11


@pytest.mark.parametrize("n", [None, 0, 1, 4])
@pytest.mark.parametrize("increasing", [False, True])
def test_vander_matches_numpy(n, increasing):
    x = np.array([1, 2, -3], np.int32)
    out = enp.vander(x, n, increasing)
    assert out.dtype == np.int32
    _close(out, np.vander(x, n, increasing))


@pytest.mark.parametrize("options", [{}, {"full": True}, {"cov": True}, {"cov": "unscaled"},
                                     {"weighted": True, "cov": True}])
@pytest.mark.parametrize("columns", [None, 2])
def test_polyfit_matches_numpy(options, columns):
    rng = np.random.default_rng(1)
    x = np.linspace(0, 1, 8)
    y = x[:, None] ** [2, 3] + 0.1 * rng.normal(size=(8, 2))
    y = y[:, 0] if columns is None else y
    kwargs = dict(options)
    if kwargs.pop("weighted", False):
        kwargs["w"] = rng.uniform(0.5, 1.0, 8)
    with ember.config.override(enable_x64=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = enp.polyfit(x, y, 2, **kwargs)
        theirs = np.polyfit(x, y, 2, **kwargs)
    for a, b in zip(ours if isinstance(ours, tuple) else [ours],
                    theirs if isinstance(theirs, tuple) else [theirs]):
        _close(a, b, rtol=1e-7)


def test_jit_and_gradients_match_jax():
    jax = pytest.importorskip("jax")
    x = np.linspace(0, 1, 6, dtype=np.float32)
    y = (3 * x ** 2 - x).astype(np.float32)

    def loss(module):
        return lambda c: (module.polyval(module.polyder(c), x) ** 2).sum() + \
            module.polyfit(x, y * c[0], 2).sum()

    c = np.array([1.0, -2.0, 0.5], np.float32)
    with ember.config.override(backend="reference"):
        ours = ember.jit(ember.grad(loss(enp)))(c)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(jax.grad(loss(jax.numpy))(c)),
                               rtol=1e-3, atol=1e-3)


def test_errors():
    with pytest.raises(EmberValueError, match=r"coefficients must be 1-D, got shape \(2, 2\)"):
        enp.polyder(np.ones((2, 2)))
    with pytest.raises(EmberValueError, match="k must be a scalar or hold m = 2 constants"):
        enp.polyint(np.ones(3), 2, k=np.ones(3))
    with pytest.raises(EmberValueError, match=r"needs 1-D roots or a square matrix"):
        enp.poly(np.ones((2, 3)))
    with pytest.raises(ConcretizationError, match="polymul.trim_leading_zeros=True."):
        ember.jit(lambda a: enp.polymul(a, a, trim_leading_zeros=True))(np.ones(2))


@pytest.mark.parametrize("p", [[1, -6, 11, -6], [0, 0, 1, 0, -4, 0, 0], [2.0], [0.0, 0.0],
                               [1, 0, 1], [3, 2, 1, 0], [1e-3, 5, 6]])
def test_roots_match_numpy(p, x64):
    got = np.asarray(enp.roots(np.array(p, np.float64)))
    want = np.roots(p).astype(complex)
    assert got.dtype == np.complex128 and got.shape == want.shape
    np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(want), atol=1e-8)


def test_roots_without_stripping_under_jit():
    p = np.array([1.0, -3.0, 2.0], np.float32)
    got = ember.jit(lambda p: enp.roots(p, strip_zeros=False))(p)
    np.testing.assert_allclose(np.sort_complex(np.asarray(got)), [1, 2], atol=1e-5)
    with pytest.raises(ConcretizationError, match="roots.strip_zeros=True. needs a concrete"):
        ember.jit(enp.roots)(p)
