"""The CUDA driver API for the GPU backend machinery (``cuda.bindings.driver``): the
GPUs present, one primary context and one stream per GPU, stream-ordered device memory,
modules loaded from NVRTC's cubin, kernel launches.

Written against the driver API's documented semantics but, at the time of writing,
never run: the machines Ember is developed on have no GPU (see the CUDA tests).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ember.backends.cuda import cublas
from ember.backends.cuda.cublas import Cublas
from ember.backends.cuda.nvrtc import CompiledCuda
from ember.backends.gpu.memory import MemoryStats
from ember.codegen.gemm import GemmPlan
from ember.codegen.gpu import LaunchShape
from ember.errors import BackendUnavailableError


@dataclass(frozen=True)
class Gpu:
    ordinal: int
    name: str
    capability: tuple[int, int]


def _driver():
    from cuda.bindings import driver

    return driver


def check(result: Any) -> Any:
    """The value(s) of a driver call, whose first element is its status."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        name = _driver().cuGetErrorName(status)
        raise RuntimeError(f"CUDA driver call failed: {name[1].decode() if name[0] == 0 else status}")
    return values[0] if len(values) == 1 else tuple(values)


@functools.cache
def gpus() -> tuple[Gpu, ...]:
    """The GPUs the driver sees; none without a driver (or without cuda-python)."""
    try:
        driver = _driver()
        check(driver.cuInit(0))
        found = []
        for ordinal in range(check(driver.cuDeviceGetCount())):
            device = check(driver.cuDeviceGet(ordinal))
            name = check(driver.cuDeviceGetName(64, device)).split(b"\0")[0].decode()
            attribute = driver.CUdevice_attribute
            major = check(driver.cuDeviceGetAttribute(
                attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
            minor = check(driver.cuDeviceGetAttribute(
                attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
            found.append(Gpu(ordinal, name, (major, minor)))
        return tuple(found)
    except Exception:  # no driver library, no device, a driver too old: no GPU here
        return ()


class CudaMemory:
    """A device allocation, freed (stream-ordered) when the last reference goes."""

    __slots__ = ("pointer", "runtime", "nbytes")

    def __init__(self, runtime: "CudaRuntime", nbytes: int) -> None:
        self.runtime = runtime
        runtime.activate()
        self.pointer = check(_driver().cuMemAllocAsync(max(nbytes, 1), runtime.stream))
        self.nbytes = nbytes
        runtime.stats.allocated(nbytes)

    def __int__(self) -> int:
        return int(self.pointer)

    def __del__(self) -> None:
        self.runtime.stats.freed(self.nbytes)
        try:
            self.runtime.activate()
            _driver().cuMemFreeAsync(self.pointer, self.runtime.stream)
        except Exception:  # interpreter shutdown: the context goes with the process
            pass


class Borrowed:
    """Device memory another library owns (imported through DLPack)."""

    __slots__ = ("pointer", "owner")

    def __init__(self, imported: Any) -> None:
        self.pointer = imported.pointer
        self.owner = imported  # its deleter runs when the last buffer over it goes

    def __int__(self) -> int:
        return int(self.pointer)


class CudaRuntime:
    """One GPU: its primary context and an Ember stream; every operation is queued on it."""

    def __init__(self, gpu: Gpu) -> None:
        driver = _driver()
        self.gpu = gpu
        self.device = check(driver.cuDeviceGet(gpu.ordinal))
        self.context = check(driver.cuDevicePrimaryCtxRetain(self.device))
        self.activate()
        self.stream = check(driver.cuStreamCreate(
            driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value))
        # Keep freed memory in the device's pool: by default the pool hands it back to
        # the driver at every synchronization, and each call's outputs (and a program's
        # temporaries) would be mapped afresh on the next call (as PyTorch's and JAX's
        # allocators, memory once used stays reserved until the process ends).
        pool = check(driver.cuDeviceGetDefaultMemPool(self.device))
        check(driver.cuMemPoolSetAttribute(
            pool, driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            driver.cuuint64_t(2**64 - 1)))
        self.stats = MemoryStats()
        self._cublas: Cublas | None | bool = False  # False: not looked for yet

    @property
    def cublas(self) -> Cublas | None:
        """A cuBLAS handle on this runtime's stream, or None without the library."""
        if self._cublas is False:
            library = cublas.load_library()
            self.activate()
            self._cublas = None if library is None else Cublas(library, int(self.stream))
        return self._cublas

    def activate(self) -> None:
        check(_driver().cuCtxSetCurrent(self.context))

    def allocate(self, nbytes: int) -> CudaMemory:
        return CudaMemory(self, nbytes)

    def upload(self, array: np.ndarray) -> CudaMemory:
        memory = CudaMemory(self, array.nbytes)
        if array.nbytes:  # pageable source: the call returns once the data is staged
            check(_driver().cuMemcpyHtoDAsync(memory.pointer, array.ctypes.data, array.nbytes,
                                              self.stream))
        return memory

    def download(self, memory: CudaMemory, out: np.ndarray) -> None:
        self.activate()
        if out.nbytes:
            check(_driver().cuMemcpyDtoHAsync(out.ctypes.data, memory.pointer, out.nbytes,
                                              self.stream))
        self.synchronize()

    def synchronize(self) -> None:
        check(_driver().cuStreamSynchronize(self.stream))

    def copy(self, dst: CudaMemory, src: CudaMemory, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src`` to ``dst`` on the device, queued on the stream."""
        self.activate()
        check(_driver().cuMemcpyDtoDAsync(dst.pointer, src.pointer, nbytes, self.stream))

    def load(self, compiled: CompiledCuda) -> "CudaModule":
        self.activate()
        return CudaModule(self, check(_driver().cuModuleLoadData(compiled.image)), compiled)


class CudaModule:
    def __init__(self, runtime: CudaRuntime, module: Any, compiled: CompiledCuda) -> None:
        self.runtime = runtime
        self.module = module
        self.compiled = compiled
        self.functions: dict[str, Any] = {}
        self.gemm_calls: dict[GemmPlan, cublas.CublasGemm | None] = {}

    def function(self, name: str) -> Any:
        if name not in self.functions:
            self.functions[name] = check(_driver().cuModuleGetFunction(self.module, name.encode()))
        return self.functions[name]

    def launch(self, kernel: str, memories: Sequence[CudaMemory], shape: LaunchShape) -> None:
        # kernelParams: an array of pointers, each to one parameter's value (a pointer)
        values = np.array([int(m) for m in memories] or [0], dtype=np.uint64)
        params = np.array([values.ctypes.data + 8 * i for i in range(len(memories))] or [0],
                          dtype=np.uint64)
        self.runtime.activate()
        check(_driver().cuLaunchKernel(self.function(kernel), *shape.grid, *shape.block, 0,
                                       self.runtime.stream, params.ctypes.data, 0))

    def library_gemm(self, plan: GemmPlan, memories: Sequence[CudaMemory]) -> bool:
        handle = self.runtime.cublas
        if handle is None:
            return False
        if plan not in self.gemm_calls:
            self.gemm_calls[plan] = cublas.cublas_gemm(plan)
        call = self.gemm_calls[plan]
        if call is None:
            return False
        self.runtime.activate()
        a, b, c = (int(m) for m in memories)
        handle.gemm(call, a, b, c, plan.dtype.itemsize)
        return True


class CompileOnlyModule:
    """The kernels of a program compiled where no GPU is present: inspectable, not runnable."""

    def __init__(self, compiled: CompiledCuda) -> None:
        self.compiled = compiled
        self.reason = no_device_message(compiled.arch)

    def launch(self, kernel: str, memories: Sequence[Any], shape: LaunchShape) -> None:
        raise BackendUnavailableError(self.reason)

    def library_gemm(self, plan: GemmPlan, memories: Sequence[Any]) -> bool:
        return False  # the launch says why nothing runs here


def no_device_message(arch: str) -> str:
    return (f"no CUDA device: the CUDA backend compiles for {arch} here (compile-only mode) "
            "but cannot run; run on a machine with an NVIDIA GPU and its driver, or use "
            "another backend")
