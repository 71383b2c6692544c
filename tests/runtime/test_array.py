import numpy as np
import pytest

import ember
import ember.numpy as enp


def test_numpy_interop_and_readonly():
    x = enp.asarray([1.0, 2.0])
    host = np.asarray(x)
    assert host.dtype == np.float32 and host.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        host[0] = 5  # Ember arrays are immutable; their host view is read-only


def test_asarray_does_not_alias_mutable_input():
    source = np.ones(3, np.float32)
    x = enp.asarray(source)
    source[0] = 7
    assert np.asarray(x)[0] == 1


def test_dlpack_roundtrip():
    x = enp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    back = np.from_dlpack(x)
    np.testing.assert_array_equal(back, np.arange(6).reshape(2, 3))


def test_scalar_conversions():
    x = enp.asarray(3.5)
    assert float(x) == 3.5 and int(x) == 3 and bool(x)
    assert x.item() == 3.5


def test_setitem_explains_at():
    x = enp.asarray([1.0])
    with pytest.raises(TypeError, match=r"x.at\[idx\].set"):
        x[0] = 2.0


def test_block_until_ready_tree():
    tree = {"a": enp.asarray([1.0]), "b": [enp.asarray(2.0)]}
    assert ember.block_until_ready(tree) is tree
    assert tree["a"].block_until_ready() is tree["a"]


def test_devices_lists_reference():
    assert any(d.platform == "reference" for d in ember.devices())


def test_repr():
    assert repr(enp.asarray([1, 2])) == "Array([1, 2], dtype=int32)"


def test_to_device_moves_between_backends():
    x = enp.asarray([1.0, 2.0])
    moved = x.to_device("reference")
    assert moved.device.platform == "reference"
    assert np.asarray(moved).tolist() == [1.0, 2.0]


def test_committed_and_uncommitted_placement():
    """As in JAX: device_put(x, device) commits x; asarray and constants follow the
    committed operand; two different committed devices are an error."""
    from ember.errors import EmberValueError

    on_ref = ember.device_put(np.ones(3, np.float32), "reference")
    assert on_ref.committed and not enp.asarray([1.0]).committed
    mixed = on_ref + enp.ones(3)  # the uncommitted operand moves to the committed device
    assert mixed.device.platform == "reference" and mixed.committed
    assert (on_ref * 2.0).device.platform == "reference"
    assert ember.jit(lambda x: x * 2)(on_ref).device.platform == "reference"
    elsewhere = [d for d in ember.devices() if d.platform != "reference"]
    if elsewhere:
        other = ember.device_put(np.ones(3, np.float32), elsewhere[0])
        with pytest.raises(EmberValueError, match="committed to different devices"):
            on_ref + other
