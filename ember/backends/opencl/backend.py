"""The OpenCL backend (``ember.devices("opencl")``): every OpenCL device pyopencl finds.

Arrays live in OpenCL buffers (``host_memory = False``), mirrored on the host on demand;
eager operations run the NumPy reference on the host copies; ``compile`` renders the
fused graph as one OpenCL C program, built once per device through the compile cache,
whose kernels run in schedule order on the device's in-order queue.
"""
from __future__ import annotations

import functools
import importlib.util
import shlex

from ember.backends.base import Device
from ember.backends.gpu.backend import GpuBackend
from ember.codegen.opencl import OpenCLRenderer


class OpenCLBackend(GpuBackend):
    name = "opencl"
    source_suffix = ".cl"

    def is_available(self) -> bool:
        return importlib.util.find_spec("pyopencl") is not None and bool(self.devices())

    def devices(self) -> list[Device]:
        from ember.backends.opencl.runtime import cl_devices

        return [Device(self.name, index, f"{d.name.strip()} ({d.platform.name.strip()})")
                for index, d in enumerate(cl_devices())]

    def runtime(self, device: Device):
        return _runtime(device.id)

    def renderer(self, device: Device) -> OpenCLRenderer:
        from ember.backends.opencl.runtime import cl_devices, has_fp64

        return OpenCLRenderer(fp64=has_fp64(cl_devices()[device.id]))

    def build(self, source: str, name: str, device: Device) -> bytes:
        return _runtime(device.id).binary(source, name)

    def build_command(self, name: str, device: Device) -> str:
        options = _runtime(device.id).build_options()
        return " ".join(["clBuildProgram", f"{name}.cl", shlex.join(options)]).rstrip()

    def load(self, binary: bytes, device: Device):
        return _runtime(device.id).load(binary)


@functools.cache
def _runtime(index: int):
    from ember.backends.opencl.runtime import OpenCLRuntime, cl_devices

    return OpenCLRuntime(cl_devices()[index])
