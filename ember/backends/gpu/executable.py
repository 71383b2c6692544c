"""The executable of the GPU backends: steps run in schedule order on one queue.

Values computed on the device get fresh device buffers, and each temporary is let go
right after the last step that uses it: on CUDA the stream-ordered allocator hands the
memory to the next allocation on the stream, on OpenCL the buffer is released once the
queued commands using it are done, so a program's peak is its live values, not all of
its values (``Device.memory_stats()`` shows it). A host call downloads its operands,
runs the NumPy reference and leaves its results to be uploaded when a kernel reads them.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.backends.base import Executable, literal_result
from ember.backends.gpu.buffers import DeviceBuffer, DeviceModule, DeviceRuntime
from ember.backends.gpu.program import DeviceProgram, Launch
from ember.errors import BackendUnavailableError
from ember.ir.graph import Eqn, Literal, Var
from ember.ir.interpreter import as_numpy, reference_results
from ember.passes.analysis import last_uses


class DeviceExecutable(Executable):
    def configure(self, program: DeviceProgram, runtime: DeviceRuntime,
                  module: DeviceModule) -> "DeviceExecutable":
        self.program = program
        self._runtime = runtime
        self._module = module
        self._constants = [as_device_buffer(c, runtime) for c in program.optimized.constvals]
        self._dead_after = _last_uses(program)
        return self

    def run(self, buffers: Sequence[Any]) -> list[Any]:
        if self._runtime is None:  # compiled for a device this machine does not have
            raise BackendUnavailableError(self._module.reason)
        graph = self.program.optimized
        env: dict[Var, DeviceBuffer] = dict(zip([*graph.inputs, *graph.constvars],
                                                [*buffers, *self._constants]))
        for step, dead in zip(self.program.steps, self._dead_after):
            if step.host is not None:
                self._host_call(step.host, env)
            for var in step.writes:
                env[var] = DeviceBuffer(self._runtime, var.aval.shape, var.aval.dtype,
                                        memory=self._runtime.allocate(var.aval.nbytes))
            for launch in step.launches:
                self._launch(launch, env)
            for var in dead:
                del env[var]
        return [DeviceBuffer.from_host(self._runtime, literal_result(atom))
                if isinstance(atom, Literal) else env[atom] for atom in graph.outputs]

    def _launch(self, launch: Launch, env: dict[Var, DeviceBuffer]) -> None:
        memories = [env[v].memory() for v in launch.args]
        if launch.gemm is None or not self._module.library_gemm(launch.gemm, memories):
            self._module.launch(launch.kernel, memories, launch.shape)

    def _host_call(self, eqn: Eqn, env: dict[Var, DeviceBuffer]) -> None:
        values = [literal_result(a) if isinstance(a, Literal) else env[a].host()
                  for a in eqn.inputs]
        for var, value in zip(eqn.outputs, reference_results(eqn.prim, values, eqn.params)):
            env[var] = DeviceBuffer.from_host(self._runtime, as_numpy(value, var.aval.dtype))


def _last_uses(program: DeviceProgram) -> list[list[Var]]:
    """Per step, the values no later step touches and the program does not return."""
    returned = {a for a in program.optimized.outputs if isinstance(a, Var)}
    dead: list[list[Var]] = [[] for _ in program.steps]
    for var, index in last_uses(program.step_uses()).items():
        if var not in returned:
            dead[index].append(var)
    return dead


def as_device_buffer(value: Any, runtime: DeviceRuntime | None) -> DeviceBuffer:
    """A constant of a graph: already a device buffer, or a host array to mirror."""
    if isinstance(value, DeviceBuffer):
        return value
    return DeviceBuffer.from_host(runtime, np.asarray(value))
