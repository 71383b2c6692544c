"""Window functions and i0 against NumPy; i0's gradient against JAX's."""
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberTypeError


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
@pytest.mark.parametrize("m", [-1, 0, 1, 2, 5, 8])
def test_windows_match_numpy(name, m):
    out = getattr(enp, name)(m)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), getattr(np, name)(m), atol=1e-6)


@pytest.mark.parametrize("m", [0, 1, 2, 7])
@pytest.mark.parametrize("beta", [0.0, 3.5, 14.0])
def test_kaiser_matches_numpy(m, beta):
    np.testing.assert_allclose(np.asarray(enp.kaiser(m, beta)), np.kaiser(m, beta), rtol=1e-5,
                               atol=1e-6)


def test_i0_matches_numpy_on_both_sides_of_its_series_limit():
    x = np.concatenate([np.linspace(-40, 40, 801), [29.999, 30.0, 30.001, 100.0, 700.0]])
    with ember.config.override(enable_x64=True):
        out = np.asarray(enp.i0(x))
    np.testing.assert_allclose(out, np.i0(x), rtol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.i0(x).astype(np.float32)  # inf past float32's range
    np.testing.assert_allclose(np.asarray(enp.i0(x.astype(np.float32))), expected, rtol=5e-6)
    assert float(enp.i0(np.float32(89.0))) == pytest.approx(float(np.i0(89.0)), rel=1e-5)
    assert enp.i0(np.arange(3)).dtype == np.float32


def test_i0_gradient_matches_jax():
    jax = pytest.importorskip("jax")
    x = np.array([-3.0, 0.5, 10.0, 35.0], np.float32)
    with ember.config.override(backend="reference"):
        ours = ember.jit(ember.grad(lambda v: enp.i0(v).sum()))(x)
    np.testing.assert_allclose(np.asarray(ours),
                               np.asarray(jax.grad(lambda v: jax.numpy.i0(v).sum())(x)),
                               rtol=1e-5)


def test_errors():
    with pytest.raises(EmberTypeError, match="i0 is not defined for complex dtype complex64"):
        enp.i0(np.ones(2, np.complex64))
    with pytest.raises(ConcretizationError, match=r"hanning\(M\)"):
        ember.jit(enp.hanning)(4)
