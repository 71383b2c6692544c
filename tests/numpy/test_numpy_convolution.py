"""convolve and correlate against NumPy (every mode, both length orders, complex) and
JAX; gradients and jit."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
import ember.numpy as enp
from ember.errors import EmberValueError

MODES = ["full", "same", "valid"]


@pytest.mark.parametrize("mode", MODES)
@given(n=st.integers(1, 7), m=st.integers(1, 7), seed=st.integers(0, 99))
def test_convolve_and_correlate_match_numpy(mode, n, m, seed):
    rng = np.random.default_rng(seed)
    a = (rng.normal(size=n) + 1j * rng.normal(size=n)).astype(np.complex64)
    v = (rng.normal(size=m) + 1j * rng.normal(size=m)).astype(np.complex64)
    for ours, theirs in ((enp.convolve, np.convolve), (enp.correlate, np.correlate)):
        out = np.asarray(ours(a, v, mode))
        expected = theirs(a.astype(np.complex128), v.astype(np.complex128), mode)
        assert out.shape == expected.shape
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(ours(a.real, v.real, mode)),
                                   theirs(a.real, v.real, mode), rtol=1e-5, atol=1e-5)


def test_integer_and_bool_inputs_keep_numpys_dtypes():
    a, v = np.arange(5, dtype=np.int32), np.array([1, -2, 3], np.int32)
    out = enp.convolve(a, v)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.convolve(a, v))
    b = np.array([True, False, False, True])
    np.testing.assert_array_equal(np.asarray(enp.correlate(b, b[:2], "full")),
                                  np.correlate(b, b[:2], "full"))
    assert enp.convolve(a, v, preferred_element_type=np.float32).dtype == np.float32


def test_gradient_and_jit_match_jax():
    jax = pytest.importorskip("jax")
    x, k = np.linspace(-1, 1, 6, dtype=np.float32), np.array([0.5, 1.0, -2.0], np.float32)

    def loss(np_module, grad):
        return grad(lambda a, b: (np_module.convolve(a, b, "same") ** 2).sum(), (0, 1))(x, k)

    with ember.config.override(backend="reference"):
        ours = loss(enp, lambda f, argnums: ember.jit(ember.grad(f, argnums)))
    theirs = loss(jax.numpy, lambda f, argnums: jax.grad(f, argnums))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)


def test_bad_inputs_name_the_problem():
    with pytest.raises(EmberValueError, match=r"mode must be one of .* got 'wide'"):
        enp.convolve(np.ones(3), np.ones(2), "wide")
    with pytest.raises(EmberValueError, match=r"two 1-D arrays, got shapes \(2, 2\) and \(2,\)"):
        enp.correlate(np.ones((2, 2)), np.ones(2))
    with pytest.raises(EmberValueError, match="must not be empty"):
        enp.convolve(np.ones(0), np.ones(2))
