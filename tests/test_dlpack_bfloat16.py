"""bfloat16 through DLPack, which NumPy (Ember's host buffers) cannot carry: Ember's own
capsules out, the producer's capsule read in; with PyTorch and JAX where installed."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.core import dtypes

pytestmark = pytest.mark.skipif(dtypes.bfloat16 is None, reason="needs ml_dtypes")

VALUES = np.arange(6, dtype=np.float32).reshape(2, 3) / 3


class _Producer:
    """A DLPack producer handing out another array's capsule (as a library would)."""

    def __init__(self, array):
        self._array, self.dtype = array, array.dtype

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_round_trip_through_embers_own_capsule():
    x = jnp.asarray(VALUES).astype(jnp.bfloat16)
    back = jnp.from_dlpack(_Producer(x))
    assert back.dtype == dtypes.bfloat16 and back.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(back).view(np.uint16),
                                  np.asarray(x).view(np.uint16))
    empty = jnp.from_dlpack(_Producer(jnp.zeros((0, 3), jnp.bfloat16)))
    assert empty.shape == (0, 3) and empty.dtype == dtypes.bfloat16
    assert ember.dlpack.is_supported_dtype(jnp.bfloat16)


def test_with_torch():
    torch = pytest.importorskip("torch")
    x = jnp.asarray(VALUES).astype(jnp.bfloat16)
    theirs = torch.from_dlpack(x)
    assert theirs.dtype == torch.bfloat16
    np.testing.assert_array_equal(theirs.float().numpy(), np.asarray(x).astype(np.float32))
    theirs.add_(1)  # a copy: Ember's immutable buffer is untouched
    np.testing.assert_array_equal(np.asarray(x).astype(np.float32),
                                  VALUES.astype(dtypes.bfloat16).astype(np.float32))
    source = torch.arange(6, dtype=torch.bfloat16).reshape(3, 2) / 7
    ours = jnp.from_dlpack(source)
    assert ours.dtype == dtypes.bfloat16 and ours.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(ours).astype(np.float32), source.float().numpy())
    with pytest.raises(TypeError, match="C-contiguous"):
        jnp.from_dlpack(source.T)


def test_with_jax():
    jax = pytest.importorskip("jax")
    x = jnp.asarray(VALUES).astype(jnp.bfloat16)
    theirs = jax.numpy.from_dlpack(x)
    assert theirs.dtype == jax.numpy.bfloat16
    np.testing.assert_array_equal(np.asarray(theirs).astype(np.float32),
                                  np.asarray(x).astype(np.float32))
    ours = jnp.from_dlpack(jax.numpy.arange(4, dtype=jax.numpy.bfloat16) / 3)
    np.testing.assert_array_equal(np.asarray(ours).astype(np.float32),
                                  (np.arange(4, dtype=np.float32) / 3).astype(
                                      dtypes.bfloat16).astype(np.float32))
