"""Device memory on the OpenCL backend: memory_stats() counts it, and a compiled program
lets each temporary go after its last use, so its peak is its live values."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from opencl_marks import requires_opencl

pytestmark = requires_opencl

LAYERS = 8
ROWS, WIDTH = 256, 64
ACTIVATION = ROWS * WIDTH * 4


def _stats():
    (device,) = ember.devices("opencl")[:1]
    return device, device.backend.runtime(device).stats


def _deep(ws, x):
    for w in ws:  # each product is its own GEMM kernel: one temporary per layer
        x = jnp.tanh(x @ w)
    return x


@pytest.fixture
def deep_inputs():
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((WIDTH, WIDTH)) * 0.2).astype(np.float32) for _ in range(LAYERS)]
    return ws, rng.standard_normal((ROWS, WIDTH)).astype(np.float32)


def test_memory_stats_count_device_allocations_and_frees():
    device, _ = _stats()
    gc.collect()
    before = device.memory_stats()
    x = ember.device_put(np.ones((1000,), np.float32), device)
    y = ember.jit(lambda v: v * 2.0 + 1.0)(x)  # uploads x, allocates y on the device
    y.block_until_ready()
    during = device.memory_stats()
    assert during["bytes_in_use"] == before["bytes_in_use"] + 2 * 4000
    assert during["num_allocs"] == before["num_allocs"] + 2
    assert during["peak_bytes_in_use"] >= during["bytes_in_use"]
    np.testing.assert_array_equal(np.asarray(y), np.full(1000, 3.0, np.float32))
    del x, y
    gc.collect()
    assert device.memory_stats()["bytes_in_use"] == before["bytes_in_use"]


def test_host_devices_report_no_memory_stats():
    assert ember.devices("reference")[0].memory_stats() is None


def test_a_program_releases_temporaries_after_their_last_use(deep_inputs):
    ws, x = deep_inputs
    device, stats = _stats()
    ws, x = ember.device_put((ws, x), device)
    deep = ember.jit(_deep)
    deep(ws, x).block_until_ready()  # compile; uploads the inputs
    gc.collect()
    stats.reset_peak()
    baseline = stats.bytes_in_use
    out = deep(ws, x)
    out.block_until_ready()
    # every layer's activation lived until the end before; now at most the input and
    # output of the current kernel are alive, plus the result
    assert stats.peak_bytes_in_use - baseline <= 3 * ACTIVATION
    assert stats.bytes_in_use - baseline == ACTIVATION  # only the result stays
    expected = ember.jit(_deep, backend="reference")(*ember.device_put(
        (deep_inputs[0], deep_inputs[1]), ember.devices("reference")[0]))
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-5)
