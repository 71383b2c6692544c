"""``ember.linear_transpose``: the transpose of a linear function, checked against the
matrix it multiplies by, against ``vjp``, and against JAX where installed."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp

A = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)


def _linear(np_, a):
    """A linear map of a pytree, for Ember and JAX: a matrix product, a cumulative sum
    scaled, a slice, a transpose."""
    def f(x):
        return {"a": a @ x["u"] + x["w"][0, :3], "b": np_.cumsum(x["v"]) * 2.0,
                "c": x["w"].T}
    return f


PRIMALS = {"u": np.zeros(4, np.float32), "v": np.zeros(5, np.float32),
           "w": np.zeros((2, 3), np.float32)}
COTANGENT = {"a": np.array([1.0, -2.0, 0.5], np.float32),
             "b": np.arange(5.0, dtype=np.float32), "c": np.ones((3, 2), np.float32)}


def test_the_transpose_of_a_matrix_product_is_the_transposed_matrix():
    (x,) = ember.linear_transpose(lambda x: A @ x, np.zeros(4, np.float32))(np.eye(3)[1]
                                                                               .astype(np.float32))
    np.testing.assert_allclose(np.asarray(x), A.T[:, 1], rtol=1e-6)
    scalar = ember.ShapeDtypeStruct((), np.float32)
    transposed = ember.linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, scalar, scalar)
    assert [float(v) for v in transposed(np.float32(1.0))] == [0.5, -0.5]


@pytest.mark.parametrize("jitted", [False, True])
def test_equals_vjp_on_a_pytree(jitted):
    f = _linear(jnp, A)
    transposed = ember.linear_transpose(f, PRIMALS)
    (got,) = (ember.jit(transposed) if jitted else transposed)(COTANGENT)
    (want,) = ember.vjp(f, PRIMALS)[1](COTANGENT)
    for name in PRIMALS:
        np.testing.assert_allclose(np.asarray(got[name]), np.asarray(want[name]), rtol=1e-6)
        assert got[name].dtype == PRIMALS[name].dtype


def test_non_linear_functions_and_wrong_cotangents_are_errors():
    with pytest.raises(TypeError, match="'sin'"):
        ember.linear_transpose(jnp.sin, np.float32(1.0))(np.float32(1.0))
    with pytest.raises(TypeError, match="not linear"):
        ember.linear_transpose(lambda x: x * x, np.float32(1.0))(np.float32(1.0))
    with pytest.raises(TypeError, match="integer -> integer"):
        ember.linear_transpose(lambda x: x.astype(np.float32), np.int32(1))
    transposed = ember.linear_transpose(lambda x: A @ x, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="does not match"):
        transposed(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="tree does not match"):
        transposed((np.zeros(3, np.float32),))


def test_as_jax():
    jax = pytest.importorskip("jax")
    (theirs,) = jax.linear_transpose(_linear(jax.numpy, A), PRIMALS)(COTANGENT)
    (ours,) = ember.linear_transpose(_linear(jnp, A), PRIMALS)(COTANGENT)
    for name in PRIMALS:
        np.testing.assert_allclose(np.asarray(ours[name]), np.asarray(theirs[name]), rtol=1e-6)
    complex_in = np.zeros(2, np.complex64)
    ours = ember.linear_transpose(lambda z: z * (1 + 2j), complex_in)(np.ones(2, np.complex64))
    theirs = jax.linear_transpose(lambda z: z * (1 + 2j), complex_in)(np.ones(2, np.complex64))
    np.testing.assert_allclose(np.asarray(ours[0]), np.asarray(theirs[0]), rtol=1e-6)
