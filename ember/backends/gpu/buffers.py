"""Device buffers of the GPU backends, and the device API a backend implements.

Ember arrays are immutable, so a buffer's host copy, once made, stays valid: a buffer
holds device memory, a host copy, or both, and makes the missing one on first use.
Eager operations (which run the NumPy reference on the host) thus never copy back and
forth, and a compiled program's inputs are uploaded once.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from ember.backends.gpu.memory import MemoryStats
from ember.codegen.gemm import GemmPlan
from ember.codegen.gpu import LaunchShape


class DeviceRuntime(Protocol):
    """One device's memory and queue (CUDA: a stream; OpenCL: a command queue)."""

    stats: MemoryStats

    def allocate(self, nbytes: int) -> Any: ...

    def upload(self, array: np.ndarray) -> Any: ...

    def download(self, memory: Any, out: np.ndarray) -> None: ...

    def synchronize(self) -> None: ...


class DeviceModule(Protocol):
    """The compiled kernels of one program, launched in order on the runtime's queue.
    A module compiled for a device this machine lacks says why in ``reason``."""

    def launch(self, kernel: str, memories: Sequence[Any], shape: LaunchShape) -> None: ...

    def library_gemm(self, plan: GemmPlan, memories: Sequence[Any]) -> bool:
        """Run the GEMM of ``plan`` (operands A, B, output C) through the device's BLAS
        library and return True, or return False to have the generated kernel run."""
        ...


class DeviceBuffer:
    """An array on a device: device memory and/or a read-only host copy."""

    __slots__ = ("shape", "dtype", "runtime", "_memory", "_host", "__weakref__")

    def __init__(self, runtime: DeviceRuntime | None, shape: tuple[int, ...], dtype: np.dtype,
                 memory: Any = None, host: np.ndarray | None = None) -> None:
        self.runtime = runtime  # None: a compile-only device, where nothing is on a device
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self._memory = memory
        self._host = host

    @classmethod
    def from_host(cls, runtime: DeviceRuntime | None, array: np.ndarray) -> "DeviceBuffer":
        host = np.ascontiguousarray(array) if array.ndim else np.array(array)
        if host is array and host.flags.writeable:
            host = host.copy()  # the caller may still write to its array
        host.flags.writeable = False
        return cls(runtime, host.shape, host.dtype, host=host)

    def memory(self) -> Any:
        """The device memory, uploaded from the host copy on first use."""
        if self._memory is None:
            self._memory = self.runtime.upload(self._host)
        return self._memory

    def host(self) -> np.ndarray:
        """The read-only host copy, downloaded on first use (waits for the device)."""
        if self._host is None:
            host = np.empty(self.shape, self.dtype)
            self.runtime.download(self._memory, host)
            host.flags.writeable = False
            self._host = host
        return self._host

    def __repr__(self) -> str:
        where = "+".join(w for w, v in (("device", self._memory), ("host", self._host))
                         if v is not None)
        return f"DeviceBuffer({self.dtype.name}{list(self.shape)}, {where})"
