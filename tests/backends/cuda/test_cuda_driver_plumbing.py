"""The CUDA run path's Python side against a stand-in for ``cuda.bindings.driver`` that
keeps "device" memory in host memory and records launches: device discovery, stream-
ordered allocation, copies both ways, module loading and the kernelParams packing.

This checks the plumbing only; the kernels themselves never run here (no GPU)."""
from __future__ import annotations

import ctypes
import enum
import gc
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ember
from ember.backends.cuda import backend as cuda_backend
from ember.backends.cuda import driver
from ember.backends.cuda.nvrtc import nvrtc_version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "opencl"))
from gpu_programs import softmax  # noqa: E402

pytestmark = pytest.mark.skipif(nvrtc_version() is None, reason="NVRTC is not installed")


class FakeDriver:
    """Every call returns (status, values...) as cuda.bindings.driver does."""

    CUdevice_attribute = SimpleNamespace(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
                                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor")
    CUstream_flags = enum.Enum("CUstream_flags", {"CU_STREAM_NON_BLOCKING": 1})
    CUmemPool_attribute = SimpleNamespace(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD="release threshold")
    cuuint64_t = int

    def __init__(self) -> None:
        self.pool_attributes: dict[str, int] = {}
        self.memory: dict[int, ctypes.Array] = {}
        self.launches: list[tuple] = []
        self.images: list[bytes] = []
        self.freed = 0
        self.arity = 0  # parameters of the kernels launched (the test sets it)

    def cuInit(self, flags): return (0,)
    def cuDeviceGetCount(self): return (0, 1)
    def cuDeviceGet(self, ordinal): return (0, ordinal)
    def cuDeviceGetName(self, length, device): return (0, b"Fake H200".ljust(length, b"\0"))
    def cuDeviceGetAttribute(self, attribute, device): return (0, 9 if attribute == "major" else 0)
    def cuDevicePrimaryCtxRetain(self, device): return (0, "context")
    def cuCtxSetCurrent(self, context): return (0,)
    def cuStreamCreate(self, flags): return (0, 0x5EED)  # a CUstream converts to its address
    def cuStreamSynchronize(self, stream): return (0,)
    def cuDeviceGetDefaultMemPool(self, device): return (0, "pool")

    def cuMemPoolSetAttribute(self, pool, attribute, value):
        assert pool == "pool"
        self.pool_attributes[attribute] = int(value)
        return (0,)
    def cuGetErrorName(self, status): return (0, b"CUDA_ERROR_FAKE")

    def cuMemAllocAsync(self, nbytes, stream):
        block = ctypes.create_string_buffer(nbytes)
        self.memory[ctypes.addressof(block)] = block
        return (0, ctypes.addressof(block))

    def cuMemFreeAsync(self, pointer, stream):
        self.freed += 1
        return (0,)

    def cuMemcpyHtoDAsync(self, device, host, nbytes, stream):
        ctypes.memmove(device, host, nbytes)
        return (0,)

    def cuMemcpyDtoHAsync(self, host, device, nbytes, stream):
        ctypes.memmove(host, device, nbytes)
        return (0,)

    def cuModuleLoadData(self, image):
        self.images.append(image)
        return (0, "module")

    def cuModuleGetFunction(self, module, name): return (0, name.decode())

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        # kernelParams: the address of an array of pointers, each to one parameter's value
        slots = (ctypes.c_uint64 * self.arity).from_address(params)
        values = [ctypes.c_uint64.from_address(slot).value for slot in slots]
        self.launches.append((function, (gx, gy, gz), (bx, by, bz), values))
        return (0,)


@pytest.fixture
def fake_gpu(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(driver, "_driver", lambda: fake)
    for cached in (driver.gpus, cuda_backend._runtime):
        cached.cache_clear()
    yield fake
    for cached in (driver.gpus, cuda_backend._runtime):
        cached.cache_clear()


def test_a_gpu_is_found_and_named(fake_gpu):
    (device,) = ember.devices("cuda")
    assert device.description == "Fake H200 (sm_90)"


def test_the_device_pool_keeps_freed_memory(fake_gpu):
    """Freed buffers stay in the stream-ordered pool (release threshold: all of it), so
    the next call's allocations do not map memory afresh."""
    ember.device_put(np.zeros(4, np.float32), "cuda")._buffer.memory()
    assert fake_gpu.pool_attributes == {"release threshold": 2**64 - 1}


def test_buffers_go_up_and_come_back(fake_gpu):
    host = np.arange(10, dtype=np.float32)
    x = ember.device_put(host, "cuda")
    assert x._buffer._host is not None and x._buffer.memory()  # uploaded on first use
    x._buffer._host = None  # forget the host copy: the next read downloads
    np.testing.assert_array_equal(np.asarray(x), host)


def test_a_call_launches_each_kernel_with_its_buffers(fake_gpu):
    x = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float32)
    compiled = ember.jit(softmax, backend="cuda").lower(x).compile()
    assert fake_gpu.images == [compiled.executable.cubin]
    fake_gpu.arity = 2  # softmax's kernel: input, output
    out = compiled(x)
    ((function, grid, block, pointers),) = fake_gpu.launches
    assert (function, grid, block) == ("fusion_0", (3, 1, 1), (256, 1, 1))
    uploaded = np.ctypeslib.as_array((ctypes.c_float * x.size).from_address(pointers[0]))
    np.testing.assert_array_equal(uploaded, x.ravel())
    assert pointers[1] == int(out._buffer.memory())
    freed = fake_gpu.freed
    del out
    gc.collect()
    assert fake_gpu.freed == freed + 1  # stream-ordered free when the array dies


def test_memory_stats_follow_allocations_and_frees(fake_gpu):
    (device,) = ember.devices("cuda")
    assert device.memory_stats()["bytes_in_use"] == 0
    x = ember.device_put(np.zeros(256, np.float32), device)
    x._buffer.memory()  # uploads: one allocation of 1 KiB
    assert device.memory_stats() == {"bytes_in_use": 1024, "peak_bytes_in_use": 1024,
                                     "num_allocs": 1, "largest_alloc_size": 1024}
    del x
    gc.collect()
    assert device.memory_stats()["bytes_in_use"] == 0
    assert device.memory_stats()["peak_bytes_in_use"] == 1024
