"""Small JAX names a program imports: ``ember.typing``, ``ember.dlpack``, ``ember.Device``,
``ember.float0``, ``ember.checkpoint_policies``."""
from __future__ import annotations

import typing

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes


def test_typing_annotations_cover_what_functions_take():
    from ember.typing import ArrayLike, DTypeLike

    allowed = typing.get_args(ArrayLike)
    for value in (jnp.ones(2), np.ones(2), np.float32(1), True, 3, 2.5, 1j):
        assert isinstance(value, allowed)

    def scale(x: ArrayLike, dtype: DTypeLike = np.float32) -> ember.Array:
        return jnp.asarray(x, dtype=dtype) * 2

    assert float(scale(1.5)) == 3.0


def test_dlpack_round_trip_and_supported_dtypes():
    x = ember.dlpack.from_dlpack(np.arange(4.0))
    assert isinstance(x, ember.Array)
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(4.0))
    supported = [np.int8, np.uint64, np.float16, np.float64, np.complex64, np.bool_,
                 dtypes.bfloat16]
    assert all(ember.dlpack.is_supported_dtype(d) for d in supported)
    assert not any(ember.dlpack.is_supported_dtype(d) for d in (object, "U2"))


def test_aliases():
    assert isinstance(ember.devices()[0], ember.Device)
    assert ember.float0 is dtypes.float0
    from ember.ad_checkpoint import checkpoint_policies

    assert ember.checkpoint_policies is checkpoint_policies


def test_as_jax():
    jax = pytest.importorskip("jax")
    pytest.importorskip("jax.dlpack")
    pytest.importorskip("jax.typing")

    for d in (np.int8, np.uint64, np.float16, np.float64, np.complex128, np.bool_,
              dtypes.bfloat16):
        assert ember.dlpack.is_supported_dtype(d) == jax.dlpack.is_supported_dtype(d), d
    assert ember.float0 == jax.float0
    assert set(dir(ember.checkpoint_policies)) >= {
        n for n in dir(jax.checkpoint_policies) if n in (
            "everything_saveable", "nothing_saveable", "dots_saveable",
            "dots_with_no_batch_dims_saveable", "save_only_these_names",
            "save_any_names_but_these", "save_from_both_policies")}
    for name in ("ArrayLike", "DTypeLike"):
        assert hasattr(jax.typing, name) and hasattr(ember.typing, name)
