"""The executable of the GPU backends: steps run in schedule order on one queue.

Values computed on the device get fresh device buffers (no arena yet); a host call
downloads its operands, runs the NumPy reference and leaves its results to be uploaded
when a kernel reads them.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.backends.base import Executable
from ember.backends.cpu.executable import literal_result
from ember.backends.gpu.buffers import DeviceBuffer, DeviceModule, DeviceRuntime
from ember.backends.gpu.program import DeviceProgram
from ember.errors import BackendUnavailableError
from ember.ir.graph import Eqn, Literal, Var
from ember.ir.interpreter import as_numpy, reference_apply


class DeviceExecutable(Executable):
    def configure(self, program: DeviceProgram, runtime: DeviceRuntime,
                  module: DeviceModule) -> "DeviceExecutable":
        self.program = program
        self._runtime = runtime
        self._module = module
        self._constants = [as_device_buffer(c, runtime) for c in program.optimized.constvals]
        return self

    def run(self, buffers: Sequence[Any]) -> list[Any]:
        if self._runtime is None:  # compiled for a device this machine does not have
            raise BackendUnavailableError(self._module.reason)
        graph = self.program.optimized
        env: dict[Var, DeviceBuffer] = dict(zip([*graph.inputs, *graph.constvars],
                                                [*buffers, *self._constants]))
        for step in self.program.steps:
            if step.host is not None:
                self._host_call(step.host, env)
            for var in step.writes:
                env[var] = DeviceBuffer(self._runtime, var.aval.shape, var.aval.dtype,
                                        memory=self._runtime.allocate(var.aval.nbytes))
            for launch in step.launches:
                self._module.launch(launch.kernel, [env[v].memory() for v in launch.args],
                                    launch.shape)
        return [DeviceBuffer.from_host(self._runtime, literal_result(atom))
                if isinstance(atom, Literal) else env[atom] for atom in graph.outputs]

    def _host_call(self, eqn: Eqn, env: dict[Var, DeviceBuffer]) -> None:
        values = [literal_result(a) if isinstance(a, Literal) else env[a].host()
                  for a in eqn.inputs]
        results = reference_apply(eqn.prim, values, eqn.params)
        if not eqn.prim.multiple_results:
            results = [results]
        for var, value in zip(eqn.outputs, results):
            env[var] = DeviceBuffer.from_host(self._runtime, as_numpy(value, var.aval.dtype))


def as_device_buffer(value: Any, runtime: DeviceRuntime | None) -> DeviceBuffer:
    """A constant of a graph: already a device buffer, or a host array to mirror."""
    if isinstance(value, DeviceBuffer):
        return value
    return DeviceBuffer.from_host(runtime, np.asarray(value))
