"""The part of a GPU backend that does not depend on the device API: placing arrays,
eager operations, compiling a graph to a ``DeviceExecutable``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.backends.base import Backend, Device, Executable
from ember.backends.gpu.buffers import DeviceBuffer, DeviceModule, DeviceRuntime
from ember.backends.gpu.executable import DeviceExecutable
from ember.backends.gpu.program import DeviceProgram, build_program
from ember.codegen.gpu import GpuRenderer
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.ir.graph import Graph
from ember.ir.interpreter import as_numpy, reference_apply
from ember.passes.analysis import cost_of_graph


class GpuBackend(Backend):
    """Subclasses implement ``devices``, ``runtime``, ``renderer`` and ``load``."""

    host_memory = False
    executable_class = DeviceExecutable

    def runtime(self, device: Device) -> DeviceRuntime | None:
        """The device's memory and queue (None on a device that can only compile)."""
        raise NotImplementedError

    def renderer(self, device: Device) -> GpuRenderer:
        raise NotImplementedError

    def load(self, program: DeviceProgram, device: Device) -> DeviceModule:
        """Compile ``program.source`` for ``device`` (through the compile cache)."""
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
        device = self.default_device()
        program = build_program(graph, self.name, self.renderer(device))
        module = self.load(program, device)
        executable = self.executable_class(
            graph=graph, optimized=program.optimized, kernels=program.kernels,
            cost=cost_of_graph(program.optimized), memory=program.memory_analysis(),
            schedule_text=program.schedule.text())
        return executable.configure(program, self.runtime(device), module)
