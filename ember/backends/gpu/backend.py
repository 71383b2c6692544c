"""The part of a GPU backend that does not depend on the device API: placing arrays,
eager operations, compiling a graph to a ``DeviceExecutable`` (``GpuTarget``: the
pipeline's stages that differ per target)."""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from ember.backends.base import Backend, Device, Executable
from ember.backends.gpu.buffers import DeviceBuffer, DeviceModule, DeviceRuntime
from ember.backends.gpu.executable import DeviceExecutable
from ember.backends.gpu.program import DeviceProgram, render_program
from ember.codegen.gpu import GpuRenderer
from ember.compiler.pipeline import Compilation, compile_program, source_name
from ember.codegen.policy import gemm_eligible, native
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.ir.graph import Graph
from ember.ir.interpreter import as_numpy, reference_apply
from ember.passes.analysis import cost_of_graph
from ember.passes.fusion import FusionPolicy


class GpuBackend(Backend):
    """Subclasses implement ``devices``, ``runtime``, ``renderer``, ``build``,
    ``build_command`` and ``load``."""

    host_memory = False
    executable_class = DeviceExecutable
    source_suffix = ""  # of the program's source file: '.cu', '.cl'

    def runtime(self, device: Device) -> DeviceRuntime | None:
        """The device's memory and queue (None on a device that can only compile)."""
        raise NotImplementedError

    def renderer(self, device: Device) -> GpuRenderer:
        raise NotImplementedError

    def build(self, source: str, name: str, device: Device) -> Any:
        """The binary of ``source`` for ``device`` (through the compile cache)."""
        raise NotImplementedError

    def build_command(self, name: str, device: Device) -> str:
        """How ``build`` compiles the program ``name``, as one line."""
        raise NotImplementedError

    def load(self, binary: Any, device: Device) -> DeviceModule:
        """The kernels of ``binary``, ready to launch on ``device``."""
        raise NotImplementedError

    # --- buffers ----------------------------------------------------------------------
    def put(self, array: np.ndarray, device: Device) -> DeviceBuffer:
        return DeviceBuffer.from_host(self.runtime(device), np.asarray(array))

    def to_host(self, buffer: DeviceBuffer) -> np.ndarray:
        return buffer.host()

    def synchronize(self, buffer: DeviceBuffer) -> None:
        if buffer.runtime is not None:
            buffer.runtime.synchronize()

    def memory_stats(self, device: Device) -> dict[str, int] | None:
        runtime = self.runtime(device)
        return None if runtime is None else runtime.stats.as_dict()

    # --- eager: the NumPy reference on the host copies ---------------------------------
    def apply_primitive(self, prim: Primitive, buffers: list, params: dict) -> Any:
        runtime = buffers[0].runtime if buffers else self.runtime(self.default_device())
        hosts = [b.host() for b in buffers]
        out_avals = prim.abstract_eval(*[ShapedArray(h.shape, h.dtype) for h in hosts],
                                       **params)
        results = reference_apply(prim, hosts, params)
        if not prim.multiple_results:
            results, out_avals = [results], [out_avals]
        outs = [DeviceBuffer.from_host(runtime, as_numpy(value, aval.dtype))
                for value, aval in zip(results, out_avals)]
        return outs if prim.multiple_results else outs[0]

    # --- compiled -----------------------------------------------------------------------
    def compile(self, graph: Graph, donated: Sequence[bool] = ()) -> Executable:
        return compile_program(graph, self.name, self.target(self.default_device())).executable

    def target(self, device: Device, renderer: GpuRenderer | None = None) -> GpuTarget:
        return GpuTarget(self, device, renderer or self.renderer(device))


class GpuTarget:
    """A GPU target of the compiler pipeline: kernels rendered by ``renderer`` into one
    program, built and loaded by the backend for ``device``, launched in schedule order."""

    def __init__(self, backend: GpuBackend, device: Device, renderer: GpuRenderer) -> None:
        self.backend = backend
        self.device = device
        self.renderer = renderer
        self.policy = FusionPolicy(native=functools.partial(native, renderer),
                                   library=gemm_eligible)
        self.lowering = {"threads": 1, "grid": True}
        self.source_suffix = backend.source_suffix

    def render(self, program: Compilation) -> DeviceProgram:
        return render_program(program.optimized, program.schedule, program.steps,
                              self.renderer)

    def build(self, program: Compilation) -> Any:
        source = program.source.source
        return self.backend.build(source, source_name([source]), self.device)

    def build_command(self, program: Compilation) -> str:
        return self.backend.build_command(source_name(program.source.units), self.device)

    def load(self, program: Compilation) -> Executable:
        device_program = program.source
        module = self.backend.load(program.binary, self.device)
        executable = self.backend.executable_class(
            graph=program.graph, optimized=device_program.optimized,
            kernels=device_program.kernels, cost=cost_of_graph(device_program.optimized),
            memory=device_program.memory_analysis(),
            schedule_text=device_program.schedule.text())
        return executable.configure(device_program, self.backend.runtime(self.device), module)
