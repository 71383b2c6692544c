"""Global arrays in one process: the API works the same before a job spans processes."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.distributed import checkpoint
from ember.experimental import multihost_utils
from ember.sharding import NamedSharding, P


@pytest.fixture(autouse=True)
def _four_devices():
    with ember.config.override(num_cpu_devices=4):
        yield


def test_from_process_local_data_and_callback():
    mesh = ember.make_mesh((2, 2), ("a", "b"))
    sharding = NamedSharding(mesh, P("a", "b"))
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = ember.make_array_from_process_local_data(sharding, data)
    y = ember.make_array_from_callback(data.shape, sharding, lambda index: data[index])
    for array in (x, y):
        assert array.shape == (4, 6) and array.sharding == sharding
        np.testing.assert_array_equal(np.asarray(array), data)
        shards = array.addressable_shards
        assert len(shards) == 4
        for shard in shards:
            np.testing.assert_array_equal(np.asarray(shard.data), data[shard.index])


def test_wrong_block_is_a_clear_error():
    mesh = ember.make_mesh((4,), ("a",))
    with pytest.raises(ember.errors.EmberValueError, match="this process holds the block"):
        ember.make_array_from_process_local_data(NamedSharding(mesh, P("a")),
                                                 np.zeros((6, 2)), (8, 2))


def test_multihost_utils_in_one_process():
    value = np.arange(3)
    np.testing.assert_array_equal(multihost_utils.process_allgather(value), value[None])
    np.testing.assert_array_equal(multihost_utils.process_allgather(value, tiled=True), value)
    np.testing.assert_array_equal(multihost_utils.broadcast_one_to_all(value), value)
    multihost_utils.sync_global_devices("alone")


def test_checkpoint_reshards_in_one_process(tmp_path):
    mesh = ember.make_mesh((4,), ("a",))
    data = np.arange(32, dtype=np.float32).reshape(8, 4)
    x = ember.make_array_from_process_local_data(NamedSharding(mesh, P("a")), data)
    checkpoint.save(tmp_path, {"x": x, "step": np.int32(7)})
    other = ember.make_mesh((2, 2), ("p", "q"))
    back = checkpoint.restore(tmp_path, {"x": NamedSharding(other, P("q", "p")),
                                         "step": np.int32(0)})
    np.testing.assert_array_equal(np.asarray(back["x"]), data)
    assert back["x"].sharding.spec == P("q", "p") and int(back["step"]) == 7
