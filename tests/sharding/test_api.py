"""Devices, meshes, specs, shardings, placement, typeof and their errors (JAX 0.10's
names, defaults and behaviour)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P
from ember.errors import EmberValueError
from ember.sharding import (
    AxisType, Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding, get_mesh, make_mesh,
    set_mesh)
from ember.sharding.visualize import sharding_layout


def test_the_host_splits_into_num_cpu_devices():
    cpu = ember.devices("cpu")
    assert [d.id for d in cpu] == list(range(8))
    assert repr(cpu[3]) == "CpuDevice(id=3)"
    with ember.config.override(backend="cpu"):
        assert ember.device_count() == ember.local_device_count() == 8
    with ember.config.override(num_cpu_devices=2):
        assert len(ember.devices("reference")) == 2


def test_jax_spelling_of_the_flag_and_the_environment_variable():
    saved = ember.config.num_cpu_devices
    try:
        ember.config.update("jax_num_cpu_devices", 4)
        assert ember.config.num_cpu_devices == 4
    finally:
        ember.config.update("num_cpu_devices", saved)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", "import ember; print(len(ember.devices('reference')))"],
        env={**os.environ, "EMBER_NUM_CPU_DEVICES": "3"}, cwd=root, capture_output=True,
        text=True, check=True)
    assert out.stdout.strip() == "3"


def test_make_mesh_defaults_to_explicit_axes():
    mesh = make_mesh((4, 2), ("data", "model"), devices=ember.devices("reference"))
    assert mesh.axis_types == (AxisType.Explicit, AxisType.Explicit)
    assert mesh.shape == {"data": 4, "model": 2} and mesh.size == 8
    np.testing.assert_array_equal(mesh.device_ids, np.arange(8).reshape(4, 2))
    auto = make_mesh((8,), ("i",), axis_types=(AxisType.Auto,),
                     devices=ember.devices("reference"))
    assert auto.axis_types == (AxisType.Auto,)
    with pytest.raises(EmberValueError, match="needs 6 devices, but 8"):
        make_mesh((3, 2), ("a", "b"), devices=ember.devices("reference"))


def test_partition_spec():
    spec = P("x", None, ("y", "z"))
    assert isinstance(spec, PartitionSpec) and spec == ("x", None, ("y", "z"))
    assert spec.axes_of(0) == ("x",) and spec.axes_of(1) == () and spec.axes_of(5) == ()
    assert spec.axes_of(2) == ("y", "z") and P(("x",)) == P("x")
    assert repr(P("i")) == "P('i',)" and repr(P()) == "P()"


@pytest.fixture
def mesh():
    return make_mesh((4, 2), ("data", "model"), devices=ember.devices("reference"))


def test_device_put_splits_and_gathers(mesh):
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    y = ember.device_put(x, NamedSharding(mesh, P("data", "model")))
    assert str(ember.typeof(y)) == "f32[8@data,4@model]"
    assert y.sharding == NamedSharding(mesh, P("data", "model", None))
    assert not y.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(y), x)  # gathers
    shards = y.addressable_shards
    assert len(shards) == 8 and {s.device for s in shards} == set(mesh.devices.flat)
    for shard in shards:
        np.testing.assert_array_equal(shard.data, x[shard.index])
        assert shard.data.shape == (2, 2) and shard.data.device == shard.device
    replicated = ember.device_put(x, NamedSharding(mesh, P()))
    assert replicated.is_fully_replicated and str(ember.typeof(replicated)) == "f32[8,4]"
    assert all(s.data.shape == (8, 4) for s in replicated.addressable_shards)
    both = ember.device_put(np.arange(8.0), NamedSharding(mesh, P(("data", "model"))))
    assert str(ember.typeof(both)) == "f32[8@(data,model)]"
    assert [s.index[0].start for s in both.addressable_shards] == list(range(8))


def test_device_put_of_a_pytree_and_single_devices(mesh):
    tree = {"a": np.ones((8, 2), np.float32), "b": np.zeros(4, np.float32)}
    placed = ember.device_put(tree, {"a": NamedSharding(mesh, P("data")),
                                     "b": NamedSharding(mesh, P("model"))})
    assert str(ember.typeof(placed["a"])) == "f32[8@data,2]"
    assert str(ember.typeof(placed["b"])) == "f32[4@model]"
    plain = jnp.ones(3)
    assert isinstance(plain.sharding, SingleDeviceSharding) and plain.is_fully_replicated
    assert plain.sharding.device == plain.device


def test_set_mesh_as_a_block_and_globally(mesh):
    assert get_mesh() is None
    with set_mesh(mesh):
        assert get_mesh() is mesh
        y = ember.reshard(np.zeros((8, 4), np.float32), P(None, "model"))
        assert str(ember.typeof(y)) == "f32[8,4@model]"
        z = ember.device_put(np.zeros(8, np.float32), P("data"))
        assert z.sharding == NamedSharding(mesh, P("data"))
    assert get_mesh() is None
    set_mesh(mesh)
    try:
        assert get_mesh() is mesh
    finally:
        set_mesh(None)
    with pytest.raises(EmberValueError, match="no mesh is set"):
        ember.reshard(np.zeros(4), P("data"))


def test_uneven_split_names_the_dimension_its_size_and_the_axis(mesh):
    with pytest.raises(EmberValueError, match=r"dimension 1 of size 3 .*mesh axis 'model' "
                                              r"\(size 2\)"):
        ember.device_put(np.zeros((8, 3)), NamedSharding(mesh, P("data", "model")))
    with pytest.raises(EmberValueError, match="argument 0 .*dimension 0 of size 6 .*'data'"):
        ember.shard_map(lambda a: a, mesh=mesh, in_specs=P("data"),
                        out_specs=P("data"))(np.zeros(6))


def test_unknown_axes_are_errors(mesh):
    with pytest.raises(EmberValueError, match="names mesh axis 'k', which is not in the mesh"):
        NamedSharding(mesh, P("k"))
    with pytest.raises(EmberValueError, match="more than once"):
        NamedSharding(mesh, P("data", "data"))
    with pytest.raises(EmberValueError, match="not in the mesh"):
        ember.shard_map(lambda a: a, mesh=mesh, in_specs=P("data"),
                        out_specs=P("k"))(np.zeros(8))
    with pytest.raises(NameError, match="unbound axis name: 'k'.*bound here"):
        ember.shard_map(lambda a: ember.lax.psum(a, "k"), mesh=mesh, in_specs=P("data"),
                        out_specs=P())(np.zeros(8))
    with pytest.raises(NameError, match="unbound axis name: 'i'"):
        ember.lax.psum(np.ones(2), "i")


def test_errors_name_the_users_line(mesh):
    with pytest.raises(EmberValueError, match=r"at .*test_api.py:\d+"):
        NamedSharding(mesh, P("k"))
    with pytest.raises(EmberValueError, match=r"differs along it.*\n.*at .*test_api.py:\d+"):
        ember.shard_map(lambda a: a, mesh=mesh, in_specs=P("data"),
                        out_specs=P())(np.zeros(8))


def test_shard_map_takes_sharded_arrays_and_returns_them(mesh):
    x = ember.device_put(np.arange(16.0, dtype=np.float32), NamedSharding(mesh, P("data")))
    out = ember.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("data"),
                          out_specs=P("data"))(x)
    assert out.sharding == NamedSharding(mesh, P("data"))
    assert str(ember.typeof(out)) == "f32[16@data]"
    np.testing.assert_array_equal(out, 2 * np.arange(16.0))
    np.testing.assert_array_equal(ember.jit(lambda v: v + 1)(x), np.arange(16.0) + 1)
    inferred = ember.shard_map(lambda a: a.shape[0] + 0 * a, mesh=mesh,
                               out_specs=P("data"))(x)  # in_specs from x's sharding
    np.testing.assert_array_equal(inferred, np.full(16, 4.0))


def test_check_vma_rejects_a_varying_output_said_to_be_replicated(mesh):
    with pytest.raises(EmberValueError, match="differs along it"):
        ember.shard_map(lambda a: a, mesh=mesh, in_specs=P("data"),
                        out_specs=P())(np.zeros(8))
    # Without the check, shard 0's value is kept (as JAX with check_vma=False).
    kept = ember.shard_map(lambda a: a, mesh=mesh, in_specs=P("data"), out_specs=P(),
                           check_vma=False)(np.arange(8.0))
    np.testing.assert_array_equal(kept, [0.0, 1.0])


def test_visualize_array_sharding(mesh, capsys):
    y = ember.device_put(np.zeros((8, 4)), NamedSharding(mesh, P("data", "model")))
    layout = sharding_layout(y)
    assert layout.splitlines()[1] == "│ REFERENCE 0 │ REFERENCE 1 │"
    assert len(layout.splitlines()) == 9  # 4 rows of blocks
    rows = ember.device_put(np.zeros((8, 4)), NamedSharding(mesh, P("data")))
    assert "REFERENCE 0,1" in sharding_layout(rows)
    from ember.sharding.visualize import visualize_array_sharding

    visualize_array_sharding(y)
    assert capsys.readouterr().out.strip() == layout


def test_mesh_equality_and_repr():
    devices = np.array(ember.devices("reference"), dtype=object).reshape(2, 4)
    a, b = Mesh(devices, ("x", "y")), Mesh(devices, ("x", "y"))
    assert a == b and hash(a) == hash(b)
    assert repr(a) == "Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit))"
