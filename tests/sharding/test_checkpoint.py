"""Checkpoints of sharded arrays: saved per device on a (4, 2) mesh, restored onto
another mesh, another spec or one device, bitwise equal; replicas written once."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import ember
from ember import P
from ember.errors import EmberTypeError, EmberValueError
from ember.sharding import NamedSharding, SingleDeviceSharding
from ember.sharding import checkpoint


def _state():
    rng = np.random.default_rng(0)
    return {"w": rng.normal(size=(8, 6)).astype(np.float32),
            "b": rng.normal(size=(6,)).astype(np.float32),
            "step": np.array(7, np.int32),
            "layers": [rng.normal(size=(4, 8)).astype(np.float16)]}


def _saved_on_42(mesh42):
    host = _state()
    specs = {"w": P("data", "model"), "b": P("model"), "step": P(),
             "layers": [P(None, "data")]}
    shardings = {k: NamedSharding(mesh42, s) if not isinstance(s, list)
                 else [NamedSharding(mesh42, s[0])] for k, s in specs.items()}
    return host, ember.device_put(host, shardings)


def _assert_bitwise(restored, host):
    for key in ("w", "b", "step"):
        got = np.asarray(restored[key])
        assert got.dtype == host[key].dtype
        assert got.tobytes() == host[key].tobytes()
    assert np.asarray(restored["layers"][0]).tobytes() == host["layers"][0].tobytes()


def test_restore_on_an_eight_device_mesh_reshards(mesh42, mesh_devices, tmp_path):
    host, sharded = _saved_on_42(mesh42)
    checkpoint.save(tmp_path, sharded)
    mesh8 = ember.make_mesh((8,), ("i",), devices=mesh_devices)
    restored = checkpoint.restore(tmp_path, host, {"w": NamedSharding(mesh8, P("i")),
                                                   "b": NamedSharding(mesh8, P()),
                                                   "step": NamedSharding(mesh8, P()),
                                                   "layers": NamedSharding(mesh8, P(None, "i"))})
    _assert_bitwise(restored, host)
    assert restored["w"].sharding == NamedSharding(mesh8, P("i"))
    assert restored["layers"][0].sharding == NamedSharding(mesh8, P(None, "i"))
    shard = restored["w"].addressable_shards[3]
    np.testing.assert_array_equal(shard.data, host["w"][3:4])


def test_restore_on_one_device(mesh42, mesh_devices, tmp_path):
    host, sharded = _saved_on_42(mesh42)
    checkpoint.save(tmp_path, sharded)
    one = SingleDeviceSharding(mesh_devices[5])
    restored = checkpoint.restore(tmp_path, host, one)
    _assert_bitwise(restored, host)
    assert restored["w"].sharding == one and restored["w"].is_fully_replicated
    # No shardings given: each target leaf's own (host values go to the default device).
    _assert_bitwise(checkpoint.restore(tmp_path, host), host)


def test_restore_takes_the_targets_own_shardings(mesh42, tmp_path):
    host, sharded = _saved_on_42(mesh42)
    checkpoint.save(tmp_path, sharded)
    target = dict(sharded, w=ember.ShapeDtypeStruct((8, 6), np.float32,
                                                    sharding=NamedSharding(mesh42, P("model"))))
    restored = checkpoint.restore(tmp_path, target)
    _assert_bitwise(restored, host)
    assert restored["w"].sharding == NamedSharding(mesh42, P("model"))
    assert restored["b"].sharding == sharded["b"].sharding


def test_each_device_writes_its_distinct_shards_once(mesh42, tmp_path):
    _, sharded = _saved_on_42(mesh42)
    checkpoint.save(tmp_path, sharded)
    index = json.loads((tmp_path / "index.json").read_text())["leaves"]
    assert np.asarray(sharded["step"].addressable_shards[7].data).shape == ()  # 0-d stays 0-d
    assert len(index["w"]["pieces"]) == 8           # every device holds a distinct block
    assert len(index["b"]["pieces"]) == 2           # replicated over 'data': one per column
    assert len(index["step"]["pieces"]) == 1        # fully replicated: written once
    assert len(index["layers.0"]["pieces"]) == 4
    assert index["w"]["saved_sharding"] == {"mesh": {"data": 4, "model": 2},
                                            "spec": ["data", "model"]}
    files = {p["file"] for p in index["w"]["pieces"]}
    assert len(files) == 8 and all((tmp_path / f).exists() for f in files)
    # The pieces together are the whole array, each where the saved sharding put it.
    starts = sorted(tuple(b[0] for b in p["bounds"]) for p in index["w"]["pieces"])
    assert starts == [(r, c) for r in (0, 2, 4, 6) for c in (0, 3)]


def test_saving_again_replaces_the_older_files(mesh42, mesh_devices, tmp_path):
    _, sharded = _saved_on_42(mesh42)
    checkpoint.save(tmp_path, sharded)
    small = {"x": ember.device_put(np.ones(4, np.float32),
                                   SingleDeviceSharding(mesh_devices[0]))}
    first = {p.name for p in tmp_path.iterdir()}
    checkpoint.save(tmp_path, small)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and names[0] == "index.json" and names[1] not in first
    assert re.fullmatch(rf"shards-\w+-{mesh_devices[0].platform}-00000\.safetensors", names[1])
    np.testing.assert_array_equal(checkpoint.restore(tmp_path, small)["x"], np.ones(4))


def test_mismatches_are_clear_errors(mesh42, tmp_path):
    host, sharded = _saved_on_42(mesh42)
    checkpoint.save(tmp_path, sharded)
    with pytest.raises(EmberValueError, match="missing \\['extra'\\]"):
        checkpoint.restore(tmp_path, dict(host, extra=np.zeros(1, np.float32)))
    with pytest.raises(EmberValueError, match="has shape \\(8, 6\\).*expects \\(6, 8\\)"):
        checkpoint.restore(tmp_path, dict(host, w=np.zeros((6, 8), np.float32)))
    with pytest.raises(EmberTypeError, match="dtype float32.*expects float64"):
        checkpoint.restore(tmp_path, dict(host, w=np.zeros((8, 6), np.float64)))
    mesh4 = ember.make_mesh((4,), ("i",), devices=list(mesh42.devices.flat)[:4])
    whole = NamedSharding(mesh42, P())
    with pytest.raises(EmberValueError, match="dimension 0 of size 6"):
        checkpoint.restore(tmp_path, host, {"w": whole, "b": NamedSharding(mesh4, P("i")),
                                            "step": whole, "layers": whole})
    with pytest.raises(EmberValueError, match="no sharded checkpoint"):
        checkpoint.restore(tmp_path / "nowhere", host)


def test_a_save_that_fails_before_its_index_leaves_the_previous_one(mesh42, tmp_path,
                                                                    monkeypatch):
    host, sharded = _saved_on_42(mesh42)
    checkpoint.save(tmp_path, sharded)
    write = checkpoint._atomic_write

    def crash_at_the_index(path, payload):
        if path.endswith("index.json"):
            raise OSError("disk full")
        write(path, payload)

    monkeypatch.setattr(checkpoint, "_atomic_write", crash_at_the_index)
    changed = dict(sharded, w=ember.device_put(np.zeros((8, 6), np.float32),
                                               NamedSharding(mesh42, P("data", "model"))))
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(tmp_path, changed)
    _assert_bitwise(checkpoint.restore(tmp_path, host), host)
