"""Checkpoints: round trips of nested trees (incl. bfloat16 and optimizer state), clear
errors on mismatches, and atomic saves that survive a crash mid-write."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
import pytest
import safetensors

import ember.numpy as jnp
from ember import optim, serialization
from ember.core.pytree import register_dataclass, tree_flatten
from ember.errors import EmberTypeError, EmberValueError


@register_dataclass
@dataclasses.dataclass(frozen=True)
class Dense:
    weight: Any
    bias: Any
    name: str = dataclasses.field(default="dense", metadata={"static": True})


class Pair(NamedTuple):
    first: Any
    second: Any


def _tree(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "layers": [Dense(jnp.asarray(rng.standard_normal((3, 2)), jnp.float32),
                         jnp.asarray(rng.standard_normal(2), jnp.bfloat16)),
                   Dense(jnp.asarray(rng.standard_normal((2, 2)), jnp.float16), None)],
        "pair": Pair(jnp.asarray(rng.integers(0, 9, 4), jnp.int32),
                     jnp.asarray(rng.standard_normal(()), jnp.float32)),
        "mask": jnp.asarray([True, False]),
        "table": jnp.asarray(rng.standard_normal((4, 2)), jnp.bfloat16),
    }


def _assert_same(a: Any, b: Any) -> None:
    leaves_a, tree_a = tree_flatten(a)
    leaves_b, tree_b = tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_nested_tree_with_bfloat16(tmp_path):
    tree = _tree()
    path = tmp_path / "ckpt.safetensors"
    serialization.save(path, tree, metadata={"step": "7"})
    restored = serialization.load(path, _tree(seed=1))
    _assert_same(restored, tree)
    assert restored["table"].dtype == ml_dtypes.bfloat16


def test_file_is_plain_safetensors_with_tree_paths(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    serialization.save(path, _tree())
    stored = dict(safetensors.deserialize(path.read_bytes()))
    assert sorted(stored) == ["layers.0.bias", "layers.0.weight", "layers.1.weight", "mask",
                              "pair.first", "pair.second", "table"]
    assert stored["table"]["dtype"] == "BF16" and stored["table"]["shape"] == [4, 2]


def test_round_trip_optimizer_state(tmp_path):
    params = _tree()["layers"][0]
    optimizer = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(0.1))
    state = optimizer.init(params)
    _, state = optimizer.update(params, state, params)
    path = tmp_path / "opt.safetensors"
    serialization.save(path, state)
    _assert_same(serialization.load(path, optimizer.init(params)), state)


@pytest.mark.parametrize("change, error, message", [
    (lambda t: {**t, "table": jnp.zeros((4, 3), jnp.bfloat16)}, EmberValueError,
     r"'table' has shape \(4, 2\), but the target expects \(4, 3\)"),
    (lambda t: {**t, "table": jnp.zeros((4, 2), jnp.float32)}, EmberTypeError,
     "'table' has dtype bfloat16, but the target expects float32"),
    (lambda t: {**t, "extra": jnp.zeros(1)}, EmberValueError, r"missing \['extra'\]"),
    (lambda t: {k: v for k, v in t.items() if k != "mask"}, EmberValueError,
     r"unexpected \['mask'\]"),
])
def test_mismatched_checkpoint_fails_clearly(tmp_path, change, error, message):
    path = tmp_path / "ckpt.safetensors"
    serialization.save(path, _tree())
    with pytest.raises(error, match=message):
        serialization.load(path, change(_tree()))


def test_crash_mid_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    good = _tree(seed=0)
    serialization.save(path, good)

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr(serialization.os, "fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        serialization.save(path, _tree(seed=1))
    monkeypatch.undo()
    _assert_same(serialization.load(path, good), good)
    assert os.listdir(tmp_path) == ["ckpt.safetensors"], "the temporary file was left behind"


def test_unsupported_dtype_is_named(tmp_path):
    with pytest.raises(EmberTypeError, match="'z' has dtype complex128"):
        serialization.save(tmp_path / "c.safetensors", {"z": np.zeros(2, np.complex128)})


def test_colliding_names_are_rejected(tmp_path):
    with pytest.raises(EmberValueError, match=r"share the checkpoint names \['a.b'\]"):
        serialization.save(tmp_path / "c.safetensors", {"a.b": np.zeros(1), "a": {"b": np.ones(1)}})
