"""ember.flatten_util.ravel_pytree against jax.flatten_util: values, dtypes, round trip,
and under jit and grad; device_get and local_devices, which such programs call too."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.flatten_util import ravel_pytree

TREE = {"w": np.arange(6.0, dtype=np.float32).reshape(2, 3), "b": np.float32(0.5),
        "steps": (np.array([1, 2], np.int32),)}


def test_round_trip_keeps_shapes_and_dtypes():
    flat, unravel = ravel_pytree(TREE)
    assert flat.shape == (9,) and flat.dtype == np.float32
    back = unravel(flat * 2)
    assert back["w"].shape == (2, 3) and back["steps"][0].dtype == np.int32
    np.testing.assert_array_equal(np.asarray(back["w"]), TREE["w"] * 2)
    np.testing.assert_array_equal(np.asarray(back["steps"][0]), [2, 4])
    with pytest.raises(ValueError, match="shape"):
        unravel(jnp.ones(3))


def test_gradient_as_a_flat_vector():
    params = {"w": np.ones((2, 2), np.float32), "b": np.zeros(2, np.float32)}
    flat, unravel = ravel_pytree(params)

    def loss(vector):
        p = unravel(vector)
        return jnp.sum((p["w"] @ np.array([1.0, 2.0], np.float32) + p["b"]) ** 2)

    grad = ember.jit(ember.grad(loss))(flat)
    expected = ravel_pytree(ember.grad(lambda p: loss(ravel_pytree(p)[0]))(params))[0]
    np.testing.assert_allclose(np.asarray(grad), np.asarray(expected), rtol=1e-6)


def test_empty_tree():
    flat, unravel = ravel_pytree({})
    assert flat.shape == (0,)
    assert unravel(flat) == {}


def test_matches_jax():
    jax_flatten_util = pytest.importorskip("jax.flatten_util")
    ours, _ = ravel_pytree(TREE)
    theirs, _ = jax_flatten_util.ravel_pytree(TREE)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_device_get_and_local_devices():
    tree = ember.device_get({"a": jnp.ones(2), "b": 3})
    assert isinstance(tree["a"], np.ndarray) and tree["b"] == 3
    assert ember.local_devices() == ember.devices(ember.default_backend())
