"""The CUDA backend (``ember.devices("cuda")``).

Two levels of availability:

- *compiling* needs NVRTC only (``cuda-python`` + ``nvidia-cuda-nvrtc``): then
  ``is_available()`` is True, and ``ember.jit(f, backend="cuda").lower(*args).compile()``
  renders and NVRTC-compiles every kernel, for the GPU's architecture or, without a GPU,
  for ``sm_90`` (``compiled.kernels[i].source`` is CUDA C; ``compiled.executable.ptx``
  and ``.cubin`` the result);
- *running* needs a GPU and its driver: ``devices()`` lists the GPUs, and only those.
  Without one the backend's device is a compile-only device: arrays placed on it stay
  in host memory, and running anything on it raises ``BackendUnavailableError``
  ("no CUDA device").

Since ``ember.devices()`` and the test fixtures list backends with devices, a machine
without a GPU lists no CUDA device, yet can still compile for one.
"""
from __future__ import annotations

import functools
import importlib.util
from typing import Any

from ember.backends import dlpack_capsule as dlpack
from ember.backends.base import Device
from ember.backends.cuda import nvrtc
from ember.backends.cuda.driver import (Borrowed, CompileOnlyModule, CudaModule, CudaRuntime,
                                        gpus, no_device_message)
from ember.backends.gpu.buffers import DeviceBuffer
from ember.backends.gpu.backend import GpuBackend
from ember.backends.gpu.executable import DeviceExecutable
from ember.codegen.cuda import CudaRenderer
from ember.core.primitive import Primitive
from ember.errors import BackendUnavailableError, EmberValueError

COMPILE_ONLY = Device("cuda", 0, f"no CUDA device: compile-only ({nvrtc.DEFAULT_ARCH})")


class CudaExecutable(DeviceExecutable):
    """A compiled program; ``arch``, ``ptx`` and ``cubin`` show what NVRTC made of it."""

    @property
    def arch(self) -> str:
        return self._module.compiled.arch

    @property
    def ptx(self) -> str:
        return self._module.compiled.ptx

    @property
    def cubin(self) -> bytes:
        return self._module.compiled.cubin


class CudaBackend(GpuBackend):
    name = "cuda"
    executable_class = CudaExecutable
    source_suffix = ".cu"

    def is_available(self) -> bool:
        """True when NVRTC can compile (a GPU is needed to run, not to compile)."""
        return importlib.util.find_spec("cuda") is not None and nvrtc.nvrtc_version() is not None

    def devices(self) -> list[Device]:
        return [Device(self.name, g.ordinal, f"{g.name} (sm_{g.capability[0]}{g.capability[1]})")
                for g in gpus()]

    def default_device(self) -> Device:
        found = self.devices()
        return found[0] if found else COMPILE_ONLY

    def runtime(self, device: Device) -> CudaRuntime | None:
        return _runtime(device.id) if gpus() else None

    def renderer(self, device: Device) -> CudaRenderer:
        return CudaRenderer()

    def arch(self, device: Device) -> str:
        if not gpus():
            return nvrtc.DEFAULT_ARCH
        return nvrtc.arch_for(*gpus()[device.id].capability)

    def build(self, source: str, name: str, device: Device) -> nvrtc.CompiledCuda:
        return nvrtc.compile_cuda(source, name, self.arch(device))

    def build_command(self, name: str, device: Device) -> str:
        return nvrtc.command(name, self.arch(device))

    def load(self, compiled: nvrtc.CompiledCuda,
             device: Device) -> CudaModule | CompileOnlyModule:
        runtime = self.runtime(device)
        if runtime is None:
            return CompileOnlyModule(compiled)
        return runtime.load(compiled)

    # --- DLPack (zero-copy exchange with PyTorch, CuPy, ...) ------------------------------
    def dlpack_device(self, buffer: DeviceBuffer) -> tuple[int, int]:
        if buffer.runtime is None:  # the compile-only device holds host memory
            return (dlpack.KDL_CPU, 0)
        return (dlpack.KDL_CUDA, buffer.runtime.gpu.ordinal)

    def dlpack_capsule(self, buffer: DeviceBuffer, stream: int | None = None) -> Any:
        """A capsule of the device memory, ready for use on any stream (Ember's stream is
        synchronized first), holding ``buffer`` alive until the consumer is done."""
        if buffer.runtime is None:
            return buffer.host().__dlpack__()
        memory = buffer.memory()
        buffer.runtime.synchronize()
        return dlpack.export_capsule(int(memory), buffer.shape, buffer.dtype, dlpack.KDL_CUDA,
                                     buffer.runtime.gpu.ordinal, owner=buffer)

    def from_dlpack(self, producer: Any) -> DeviceBuffer:
        """A buffer over a CUDA tensor of another library, without a copy (the producer's
        memory stays alive as long as the buffer does)."""
        device_type, ordinal = producer.__dlpack_device__()
        if device_type != dlpack.KDL_CUDA or ordinal >= len(gpus()):
            raise EmberValueError(f"from_dlpack on the CUDA backend needs a tensor on a CUDA "
                                  f"device, got DLPack device ({device_type}, {ordinal})")
        runtime = _runtime(ordinal)
        runtime.synchronize()
        imported = dlpack.import_capsule(producer.__dlpack__(stream=None))
        return DeviceBuffer(runtime, imported.shape, imported.dtype, memory=Borrowed(imported))

    def apply_primitive(self, prim: Primitive, buffers: list, params: dict) -> Any:
        self._require_device()
        return super().apply_primitive(prim, buffers, params)

    def _require_device(self) -> None:
        if not gpus():
            raise BackendUnavailableError(no_device_message(nvrtc.DEFAULT_ARCH))


@functools.cache
def _runtime(ordinal: int) -> CudaRuntime:
    return CudaRuntime(gpus()[ordinal])
