"""A program output that is only a reshape of a value the program computes is that
value's memory: the value is written into the output's buffer and no kernel copies it
(``passes/memory.py``, ``BufferPlan.views``). Each case is checked against the reference
backend and for which steps still run a kernel."""
import numpy as np

import ember
import ember.numpy as jnp
from tests.backends.cpu.cpu_testing import assert_matches_reference, compiled, requires_cpu

pytestmark = requires_cpu


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _kinds(fun, *args) -> list[str]:
    return [k.kind for k in compiled(fun, *args).kernels]


def test_a_reshaped_gemm_result_is_written_into_the_output():
    def fun(x, w):
        y = jnp.tanh(x @ w)
        return y.reshape(8, 4, 16), jnp.sum(y * 2.0)

    x, w = _data(32, 32), _data(32, 16, seed=1)
    assert _kinds(fun, x, w) == ["library", "view", "kernel"]
    assert_matches_reference(fun, x, w)


def test_squeezes_and_new_axes_of_a_kernel_result():
    def fun(x):
        y = jnp.exp(x)
        return y[:, None, :], jnp.squeeze(y[None], 0).reshape(-1)[::2], jnp.sum(y, axis=1)

    x = _data(6, 10)
    kinds = _kinds(fun, x)
    assert kinds.count("view") == 1, kinds
    assert_matches_reference(fun, x)


def test_reshapes_that_still_copy():
    """A value returned as itself and reshaped keeps two buffers; a second reshape of
    the same value into another output copies it; a reshaped argument is copied."""
    def two_outputs(x):
        y = jnp.sin(x)
        return y, y.reshape(-1)

    def two_reshapes(x):
        y = jnp.sin(x)
        return y.reshape(-1), y.reshape(2, -1), jnp.max(y)

    x = _data(4, 8)
    assert "view" not in _kinds(two_outputs, x)
    assert _kinds(two_reshapes, x).count("view") == 1
    assert_matches_reference(two_outputs, x)
    assert_matches_reference(two_reshapes, x)
    assert_matches_reference(lambda x: (x.reshape(-1), x * 2.0), x)


def test_results_of_earlier_calls_are_kept():
    fun = ember.jit(lambda x: (jnp.cos(x) * 3.0).reshape(-1), backend="cpu")
    x1, x2 = _data(5, 7), _data(5, 7, seed=1)
    first = fun(x1)
    second = fun(x2)
    np.testing.assert_allclose(np.asarray(first), (np.cos(x1) * 3).reshape(-1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(second), (np.cos(x2) * 3).reshape(-1), rtol=1e-6)


def test_a_donated_argument_and_a_reshaped_output():
    def fun(x, y):
        z = x * y + 1.0
        return z.reshape(-1), jnp.tanh(z)

    x, y = _data(16, 16), _data(16, 16, seed=1)
    want = ((x * y + 1).reshape(-1), np.tanh(x * y + 1))
    got = ember.jit(fun, backend="cpu", donate_argnums=(0,))(x.copy(), y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-6, atol=1e-6)


def test_a_host_call_reads_the_value_in_its_own_shape():
    """The value lives in the output's memory (shape 16) and LU, a host call, reads it
    as the 4 x 4 matrix it is."""
    def fun(x):
        y = jnp.exp(x)
        return y.reshape(-1), jnp.linalg.det(y)

    x = _data(4, 4)
    assert _kinds(fun, x)[:3] == ["kernel", "view", "host"]
    assert_matches_reference(fun, x, tolerance=(1e-5, 1e-6))
