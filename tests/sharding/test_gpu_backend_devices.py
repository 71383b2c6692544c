"""OpenCL and CUDA list every device they find, and the collective semantics and the
shard_map training runs hold on a mesh of a GPU backend's own devices, however many it
offers (PoCL: one), against the reference backend."""
from __future__ import annotations

import types

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P, lax
from tests.conftest import BACKENDS
from tests.sharding.test_training import _assert_same_run, _data, _loss, _sgd, _train

GPU_BACKENDS = [b for b in ("opencl", "cuda") if b in BACKENDS and ember.devices(b)]


def test_opencl_lists_every_device_of_every_platform(monkeypatch):
    pytest.importorskip("pyopencl")
    from ember.backends.opencl import runtime

    platform = lambda name: types.SimpleNamespace(name=name)  # noqa: E731
    found = (types.SimpleNamespace(name="gpu a ", platform=platform("P1")),
             types.SimpleNamespace(name="gpu b", platform=platform("P1")),
             types.SimpleNamespace(name="cpu c", platform=platform("P2 ")))
    monkeypatch.setattr(runtime, "cl_devices", lambda: found)
    # (where no OpenCL runtime is installed, the backend was found absent and cached so)
    from ember.backends.opencl.backend import OpenCLBackend
    from ember.runtime import devices

    loaded = devices._load
    monkeypatch.setattr(devices, "_load",
                        lambda name: OpenCLBackend() if name == "opencl" else loaded(name))
    listed = ember.devices("opencl")
    assert [d.id for d in listed] == [0, 1, 2]
    assert [d.description for d in listed] == ["gpu a (P1)", "gpu b (P1)", "cpu c (P2)"]
    assert ember.device_count("opencl") == 3


def test_cuda_lists_every_gpu(monkeypatch):
    from ember.backends.cuda import backend
    from ember.backends.cuda.driver import Gpu

    found = (Gpu(0, "H100", (9, 0)), Gpu(1, "A100", (8, 0)))
    monkeypatch.setattr(backend, "gpus", lambda: found)
    listed = backend.CudaBackend().devices()
    assert [(d.id, d.description) for d in listed] == [(0, "H100 (sm_90)"), (1, "A100 (sm_80)")]


@pytest.fixture(params=GPU_BACKENDS)
def own_mesh(request):
    """A mesh over every device the GPU backend has, with that backend as the default."""
    found = ember.devices(request.param)
    with ember.config.override(backend=request.param):
        yield ember.make_mesh((len(found),), ("i",), devices=found)


def _smap(mesh, body, in_specs=P("i"), out_specs=P("i")):
    return ember.jit(ember.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs))


def test_collective_semantics_on_the_backends_own_devices(own_mesh):
    n = own_mesh.size
    x = np.arange(n, dtype=np.float32)
    out = _smap(own_mesh, lambda a: lax.psum(a, "i"))(x)
    assert out.device.platform == own_mesh.devices.flat[0].platform
    np.testing.assert_array_equal(out, np.full(n, x.sum()))
    np.testing.assert_array_equal(_smap(own_mesh, lambda a: lax.axis_index("i")[None])(x),
                                  np.arange(n))
    shift = [(j, (j + 1) % n) for j in range(n)]
    np.testing.assert_array_equal(_smap(own_mesh, lambda a: lax.ppermute(a, "i", shift))(x),
                                  np.roll(x, 1))
    tiled = _smap(own_mesh, lambda a: lax.all_gather(a, "i", tiled=True))(x)
    assert tiled.shape == (n * n,)
    np.testing.assert_array_equal(tiled, np.tile(x, n))
    scattered = _smap(own_mesh, lambda a: lax.psum_scatter(jnp.tile(a, n), "i", tiled=True))
    np.testing.assert_array_equal(scattered(x), np.full(n, x.sum()))
    z = np.arange(4 * n * n, dtype=np.float32).reshape(2 * n, 2 * n)
    there = _smap(own_mesh, lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True),
                  P("i"), P(None, "i"))
    back = _smap(own_mesh, lambda a: lax.all_to_all(a, "i", 0, 1, tiled=True),
                 P(None, "i"), P("i"))
    np.testing.assert_array_equal(back(there(z)), z)


def _reference_run(params, x, y):
    with ember.config.override(backend="reference"):
        @ember.jit
        def step(params, x, y):
            loss, grads = ember.value_and_grad(_loss)(params, x, y)
            return _sgd(params, grads), loss
        return _train(step, params, x, y)


def test_data_parallel_training_on_the_backends_own_devices(own_mesh):
    params, x, y = _data(batch=4 * own_mesh.size)

    def step(params, x, y):
        loss, grads = ember.value_and_grad(lambda p: lax.pmean(_loss(p, x, y), "i"))(params)
        return _sgd(params, grads), loss

    sharded = _smap(own_mesh, step, (P(), P("i"), P("i")), (P(), P()))
    _assert_same_run(_train(sharded, params, x, y), _reference_run(params, x, y))


def test_megatron_training_on_the_backends_own_devices(own_mesh):
    params, x, y = _data(2, hidden=8 * own_mesh.size)

    def step(params, x, y):
        def local(params):
            partial = jnp.tanh(x @ params["w1"]) @ params["w2"]
            return jnp.mean((lax.psum(partial, "i") - y) ** 2)
        loss, grads = ember.value_and_grad(local)(params)
        return _sgd(params, grads), loss

    specs = {"w1": P(None, "i"), "w2": P("i", None)}
    sharded = _smap(own_mesh, step, (specs, P(), P()), (specs, P()))
    _assert_same_run(_train(sharded, params, x, y), _reference_run(params, x, y))
