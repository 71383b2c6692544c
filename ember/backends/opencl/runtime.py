"""The OpenCL device API for the GPU backend machinery: buffers, one in-order command
queue per device, programs built through the persistent compile cache."""
from __future__ import annotations

import functools
import shlex
import threading
import warnings
from typing import Any, Sequence

import numpy as np
import pyopencl as cl

from ember.backends.gpu.memory import MemoryStats
from ember.codegen.gemm import GemmPlan
from ember.codegen.gpu import LaunchShape
from ember.config import config
from ember.runtime.compile_cache import default_cache

_CACHE_FORMAT = "ember-opencl/1"  # bump when the way programs are built changes


@functools.cache
def cl_devices() -> tuple[Any, ...]:
    """Every OpenCL device of every platform (none when no ICD is installed)."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD loader configuration / no platform
        return ()
    return tuple(d for p in platforms for d in p.get_devices())


def has_fp64(device: Any) -> bool:
    return "cl_khr_fp64" in device.extensions.split()


class OpenCLMemory:
    """A ``cl.Buffer`` that reports its release to the device's ``MemoryStats`` (OpenCL
    itself defers the release until the commands using the buffer are done)."""

    __slots__ = ("buffer", "nbytes", "stats")

    def __init__(self, buffer: cl.Buffer, nbytes: int, stats: MemoryStats) -> None:
        self.buffer = buffer
        self.nbytes = nbytes
        self.stats = stats
        stats.allocated(nbytes)

    def __del__(self) -> None:
        self.stats.freed(self.nbytes)


class OpenCLRuntime:
    def __init__(self, device: Any) -> None:
        self.device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.stats = MemoryStats()

    def allocate(self, nbytes: int) -> OpenCLMemory:
        buffer = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(nbytes, 1))
        return OpenCLMemory(buffer, nbytes, self.stats)

    def upload(self, array: np.ndarray) -> OpenCLMemory:
        if not array.nbytes:
            return self.allocate(0)
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        return OpenCLMemory(cl.Buffer(self.context, flags, hostbuf=array), array.nbytes,
                            self.stats)

    def download(self, memory: OpenCLMemory, out: np.ndarray) -> None:
        if out.nbytes:
            cl.enqueue_copy(self.queue, out, memory.buffer, is_blocking=True)

    def synchronize(self) -> None:
        self.queue.finish()

    def build_options(self) -> list[str]:
        """Correctly rounded float32 division and sqrt where the device has them (as in
        C), then ``config.cflags``: OpenCL C is built by the device's C compiler."""
        options = []
        if self.device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
            options.append("-cl-fp32-correctly-rounded-divide-sqrt")
        return options + shlex.split(config.cflags)

    def binary(self, source: str, name: str) -> bytes:
        """The device binary of ``source`` (from the compile cache when present)."""
        options = self.build_options()
        device = self.device
        key = [_CACHE_FORMAT, source, device.name, device.version, device.driver_version,
               device.platform.version, " ".join(options)]

        def build(output) -> None:
            output.write_bytes(self._from_source(source, options, name).binaries[0])

        return default_cache().get_or_build(key, ".clbin", build).read_bytes()

    def load(self, binary: bytes) -> "OpenCLModule":
        options = self.build_options()
        program = cl.Program(self.context, [self.device], [binary])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            program.build(options=options)
        return OpenCLModule(self.queue, program)

    def _from_source(self, source: str, options: list[str], name: str) -> cl.Program:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return cl.Program(self.context, source).build(options=options)
        except cl.RuntimeError as error:
            raise default_cache().rejected(
                f"the OpenCL compiler rejected the generated program {name!r}", source, name,
                ".cl", f"options: {shlex.join(options)}", str(error)) from None


class OpenCLModule:
    def __init__(self, queue: cl.CommandQueue, program: cl.Program) -> None:
        self.queue = queue
        self.program = program
        self.kernels = {k.function_name: k for k in program.all_kernels()}
        self.lock = threading.Lock()  # a kernel object holds its arguments until enqueued

    def launch(self, kernel: str, memories: Sequence[OpenCLMemory], shape: LaunchShape) -> None:
        global_size = tuple(g * b for g, b in zip(shape.grid, shape.block))
        with self.lock:
            self.kernels[kernel](self.queue, global_size, shape.block,
                                 *(m.buffer for m in memories))

    def library_gemm(self, plan: GemmPlan, memories: Sequence[OpenCLMemory]) -> bool:
        return False  # no BLAS library here: the generated GEMM kernel runs
