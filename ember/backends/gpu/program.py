"""One device program per compiled graph: the source of every kernel, and the steps.

The compiler pipeline (``ember.compiler.pipeline``) takes the graph through the same
passes, fusion (the policy facts of ``ember.codegen.policy``, asked about this target's
renderer) and lowering to kernel IR as on the CPU, so the kernel boundaries are the same
on every backend: one fusion decision, one renderer per target. Its source stage renders
the steps here. A step is a host call (an equation without a native lowering, run by its
NumPy reference) or launches: a loop kernel, or a GEMM kernel followed by its epilogue
kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ember.codegen.kernel_ir import KernelInfo
from ember.codegen.gemm import GemmPlan
from ember.codegen.gpu import GpuRenderer, LaunchShape
from ember.codegen.kernel_ir import split_at_barriers
from ember.compiler.steps import LoweredStep, kernel_info
from ember.ir.graph import Eqn, Graph, Var
from ember.passes.analysis import StepUse, liveness_peak
from ember.passes.schedule import Schedule


@dataclass(frozen=True)
class Launch:
    kernel: str  # function name in the program
    args: tuple[Var, ...]  # the buffer of each parameter, in order
    shape: LaunchShape
    gemm: GemmPlan | None = None  # a GEMM kernel: a device library may run it instead


@dataclass
class DeviceStep:
    launches: list[Launch] = field(default_factory=list)
    host: Eqn | None = None
    writes: tuple[Var, ...] = ()  # fresh buffers (empty ones may appear in no launch)


@dataclass
class DeviceProgram:
    optimized: Graph
    schedule: Schedule
    source: str  # prelude and every kernel: one compilation per graph
    steps: list[DeviceStep]
    kernels: list[KernelInfo]

    @property
    def units(self) -> list[str]:
        return [self.source]

    def step_uses(self) -> list[StepUse]:
        """The device values each step touches (what liveness needs)."""
        uses = []
        for step in self.steps:
            reads = [v for launch in step.launches for v in launch.args]
            writes = list(step.writes)
            if step.host is not None:
                reads += step.host.inputs
                writes += step.host.outputs
            uses.append(StepUse(reads, writes))
        return uses

    def memory_analysis(self) -> dict[str, int]:
        """Peak device bytes of a run, temporaries freed after their last use (as the
        executable does)."""
        graph = self.optimized
        return liveness_peak([*graph.constvars, *graph.inputs], graph.outputs,
                             self.step_uses())


def render_program(optimized: Graph, schedule: Schedule, steps: list[LoweredStep],
                   renderer: GpuRenderer) -> DeviceProgram:
    """The device program of lowered ``steps``: one source, and what each step launches."""
    parts = [renderer.prelude]
    device_steps, infos = [], []
    for lowered in steps:
        step, texts = _device_step(lowered, renderer)
        parts += texts
        device_steps.append(step)
        shown = "\n".join(texts) or f"host call: {lowered.group.host.prim.name} (NumPy reference)"
        infos.append(kernel_info(lowered, shown))
    return DeviceProgram(optimized, schedule, "\n".join(parts), device_steps, infos)


def _device_step(lowered: LoweredStep, renderer: GpuRenderer) -> tuple[DeviceStep, list[str]]:
    group = lowered.group
    if lowered.host:
        return DeviceStep(host=group.host), []
    step, texts = DeviceStep(writes=tuple(group.writes())), []
    if lowered.gemm is not None:
        text, shape = renderer.render_gemm(group.name, lowered.gemm)
        args = (*lowered.gemm_operands, group.product)
        step.launches.append(Launch(group.name, args, shape, gemm=lowered.gemm))
        texts.append(text)
    if lowered.kernel is not None:
        var_of = {buf: var for var, buf in lowered.bindings.items()}
        for kernel in split_at_barriers(lowered.kernel):  # (a scatter: copy, then update)
            texts.append(renderer.render_kernel(kernel))
            step.launches.append(Launch(kernel.name, tuple(var_of[b] for b in kernel.params),
                                        renderer.launch_shape(kernel)))
    return step, texts
