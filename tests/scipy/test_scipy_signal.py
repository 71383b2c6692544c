"""ember.scipy.signal against scipy.signal (every mode, both argument orders, 1-D to
3-D), numerical gradients, jit, and JAX where installed."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as sps

import ember
from ember.scipy import signal
from ember.test_util import check_grads

SHAPES = [((7,), (3,)), ((3,), (7,)), ((6,), (4,)), ((4,), (6,)), ((5,), (5,)),
          ((5, 6), (2, 3)), ((2, 3), (5, 6)), ((4, 5), (4, 2)), ((3, 4, 5), (2, 2, 3))]
RNG = np.random.default_rng(0)


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_matches_scipy(fn, mode, shapes, x64):
    a, v = RNG.normal(size=shapes[0]), RNG.normal(size=shapes[1])
    expected = getattr(sps, fn)(a, v, mode=mode, method="direct")
    got = getattr(signal, fn)(a, v, mode=mode)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_integer_inputs_give_floats_and_float32_stays():
    got = signal.convolve(np.array([1, 2, 3]), np.array([0, 1]))
    np.testing.assert_array_equal(got, [0.0, 1.0, 2.0, 3.0])
    assert np.asarray(got).dtype == np.float32
    assert signal.correlate(np.ones(4, np.float32), np.ones(2, np.float32)).dtype == np.float32


def test_errors():
    with pytest.raises(ValueError, match="mode"):
        signal.convolve(np.ones(3), np.ones(2), mode="circular")
    with pytest.raises(ValueError, match="at least as large"):
        signal.convolve(np.ones((3, 2)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="same number of dimensions"):
        signal.correlate(np.ones((3, 2)), np.ones(2))
    with pytest.raises(NotImplementedError, match="fft"):
        signal.convolve(np.ones(3), np.ones(2), method="fft")


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_gradients(fn, mode, x64):
    f = getattr(signal, fn)
    check_grads(lambda a, v: f(a, v, mode=mode), (RNG.normal(size=(5, 4)),
                                                  RNG.normal(size=(2, 3))), order=2, rtol=1e-6)


def test_under_jit(x64):
    a, v = RNG.normal(size=(9,)), RNG.normal(size=(4,))
    for mode in ("full", "same", "valid"):
        got = ember.jit(lambda a, v, mode=mode: signal.correlate(a, v, mode=mode))(a, v)
        np.testing.assert_allclose(got, sps.correlate(a, v, mode=mode), rtol=1e-12)


def test_matches_jax(x64):
    jax = pytest.importorskip("jax")
    jsig = pytest.importorskip("jax.scipy.signal")
    with jax.enable_x64(True):
        for (s1, s2) in SHAPES:
            a, v = RNG.normal(size=s1), RNG.normal(size=s2)
            for fn in ("convolve", "correlate"):
                for mode in ("full", "same", "valid"):
                    np.testing.assert_allclose(getattr(signal, fn)(a, v, mode=mode),
                                               getattr(jsig, fn)(a, v, mode=mode), rtol=1e-12,
                                               atol=1e-12, err_msg=f"{fn} {mode} {s1} {s2}")
