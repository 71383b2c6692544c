"""The OpenCL backend's device side: devices, buffers, eager operations, placement,
compiled programs (one per graph), the compile cache and compile errors."""
from __future__ import annotations

import numpy as np
import pytest
from opencl_marks import requires_opencl
from gpu_programs import CASES, FUSION_CASES, softmax

import ember
from ember import lax
from ember.backends.gpu.buffers import DeviceBuffer
from ember.errors import CompileError, EmberValueError
from ember.runtime.compile_cache import default_cache
from ember.runtime.devices import available_backends

pytestmark = requires_opencl


def test_devices_are_listed_with_their_names():
    devices = ember.devices("opencl")
    assert devices and all(d.platform == "opencl" for d in devices)
    assert devices[0].description  # e.g. "pthread-... (Portable Computing Language)"
    assert set(devices) <= set(ember.devices())


def test_arrays_round_trip_through_device_buffers():
    host = np.arange(12, dtype=np.int16).reshape(3, 4)
    x = ember.device_put(host, "opencl")
    assert x.device.platform == "opencl" and isinstance(x._buffer, DeviceBuffer)
    np.testing.assert_array_equal(np.asarray(x), host)
    empty = ember.device_put(np.zeros((0, 5), np.float32), "opencl")
    assert np.asarray(empty).shape == (0, 5)


def test_eager_operations_stay_on_the_device():
    x = ember.device_put(np.linspace(-1, 1, 7, dtype=np.float32), "opencl")
    y = lax.mul(lax.exp(x), x)
    assert y.device == x.device
    np.testing.assert_allclose(np.asarray(y), np.exp(np.asarray(x)) * np.asarray(x), rtol=1e-6)


def test_compiled_results_live_on_the_device_and_chain():
    x = ember.device_put(np.random.default_rng(1).standard_normal((5, 40), np.float32), "opencl")
    step = ember.jit(softmax, backend="opencl")
    y = step(step(x)).block_until_ready()
    assert y.device == x.device and y._buffer._host is None  # not copied back yet
    want = np.asarray(ember.jit(softmax, backend="reference")(softmax(np.asarray(x))))
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-5, atol=1e-7)


def test_mixing_devices_without_a_transfer_is_an_error():
    if "cpu" not in available_backends():
        pytest.skip("no second native backend")
    a = ember.device_put(np.ones(3, np.float32), "opencl")
    b = ember.device_put(np.ones(3, np.float32), "cpu")
    with pytest.raises(EmberValueError, match="different devices"):
        lax.add(a, b)
    moved = ember.device_put(b, a.device)
    np.testing.assert_array_equal(np.asarray(lax.add(a, moved)), [2, 2, 2])


def test_one_program_per_graph_with_opencl_kernels():
    case = CASES["gemm_epilogue"]
    compiled = ember.jit(case.fun, backend="opencl").lower(*case.args()).compile()
    (info,) = compiled.kernels  # the GEMM and its epilogue: one step, as on the CPU
    assert info.kind == "library"
    assert info.source.count("__kernel") == 2
    assert "barrier(CLK_LOCAL_MEM_FENCE);" in info.source  # tiles in local memory
    source = compiled.executable.program.source
    assert source.count("__kernel") == 2 and "typedef long int64_t;" in source


@pytest.mark.parametrize("name", FUSION_CASES)
def test_kernel_boundaries_are_the_cpu_backends(name):
    if "cpu" not in available_backends():
        pytest.skip("no C compiler: the CPU backend is absent")
    case = CASES[name]
    cpu = ember.jit(case.fun, backend="cpu").lower(*case.args()).compile()
    opencl = ember.jit(case.fun, backend="opencl").lower(*case.args()).compile()
    assert [(k.kind, k.ops) for k in opencl.kernels] == [(k.kind, k.ops) for k in cpu.kernels]


def test_expected_kernel_counts():
    counts = {name: len(ember.jit(CASES[name].fun, backend="opencl")
                        .lower(*CASES[name].args()).compile().kernels)
              for name in ["softmax_many_long_rows", "layernorm", "gelu_more_than_one_grid_pass",
                           "chain30", "transpose_scale"]}
    assert counts == {"softmax_many_long_rows": 1, "layernorm": 1,
                      "gelu_more_than_one_grid_pass": 1, "chain30": 1, "transpose_scale": 1}


def test_programs_are_built_once_then_loaded_from_the_cache():
    x = np.ones((3, 11), np.float32)
    ember.jit(softmax, backend="opencl").lower(x).compile()
    stats = default_cache().stats
    misses = stats.disk_misses
    ember.jit(softmax, backend="opencl").lower(x).compile()
    assert stats.disk_misses == misses


def test_a_rejected_program_is_a_compile_error_with_the_source_saved(tmp_path):
    x = np.ones(4, np.float32)
    with ember.config.override(cflags="-cl-no-such-option", cache_dir=str(tmp_path)):
        with pytest.raises(CompileError, match="bug in Ember") as caught:
            ember.jit(lambda v: lax.sin(v) * 3.0, backend="opencl")(x)
    assert "-cl-no-such-option" in str(caught.value)


def test_opencl_as_the_default_backend():
    import ember.numpy as enp

    with ember.config.override(backend="opencl"):
        x = enp.arange(6.0).reshape(2, 3)
        y = enp.sum(enp.exp(x) * 2.0, axis=1)
    assert x.device.platform == y.device.platform == "opencl"
    np.testing.assert_allclose(np.asarray(y), (np.exp(np.arange(6.0)) * 2).reshape(2, 3).sum(1),
                               rtol=1e-5)


def test_one_compiled_program_called_from_several_threads():
    from concurrent.futures import ThreadPoolExecutor

    compiled = ember.jit(softmax, backend="opencl")
    inputs = [np.random.default_rng(seed).standard_normal((8, 50), np.float32) for seed in range(6)]
    compiled(inputs[0])  # compile once
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda x: np.asarray(compiled(x)), inputs))
    for x, got in zip(inputs, results):
        want = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(got, want / want.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
