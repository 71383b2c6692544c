"""One C module per compiled graph: every kernel and GEMM call, plus the entry point.

    void run(void **b, int64_t segment);

``b[0]`` is the arena of temporaries, then come the program's inputs (arguments, then
constants), its outputs, and results of host calls. Host calls split the program into
native *segments*; without them there is a single segment 0, so a call of the compiled
function is a single Python → C crossing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ember.backends.base import KernelInfo
from ember.backends.cpu.gemm_call import render_gemm
from ember.backends.cpu.program import LoweredStep
from ember.codegen.c import CRenderer
from ember.codegen.kernel_ir import Buffer
from ember.ir.graph import Var
from ember.passes.memory import BufferPlan, Location

PRELUDE = """\
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ember_math.h"
#include "ember_kernels.h"
"""


@dataclass
class Layout:
    """Slot numbers of the pointer array ``b``."""

    inputs: int
    outputs: int
    host: int

    def slot(self, location: Location) -> int:
        base = {"input": 1, "output": 1 + self.inputs,
                "host": 1 + self.inputs + self.outputs}[location.kind]
        return base + location.slot

    @property
    def size(self) -> int:
        return 1 + self.inputs + self.outputs + self.host


@dataclass
class Module:
    source: str
    segments: list[list[int]]  # step indices of each native segment
    kernels: list[KernelInfo] = field(default_factory=list)
    uses_blas: bool = False


def build_module(steps: list[LoweredStep], plan: BufferPlan, layout: Layout,
                 renderer: CRenderer, blas_prefix: str) -> Module:
    parts = [PRELUDE]
    uses_blas = any(s.gemm is not None for s in steps)
    if uses_blas:
        parts.append("#include <cblas.h>\n")
    infos: list[KernelInfo] = []
    calls: dict[int, list[str]] = {}
    for index, step in enumerate(steps):
        text, kernel_source, call = _render_step(step, plan, layout, renderer, blas_prefix)
        if text:
            parts.append(text)
        calls[index] = call
        infos.append(_kernel_info(step, kernel_source))
    segments = _segments(steps)
    parts.append(_entry(segments, calls, steps))
    return Module("\n".join(parts), segments, infos, uses_blas)


def _segments(steps: list[LoweredStep]) -> list[list[int]]:
    segments: list[list[int]] = [[]]
    for index, step in enumerate(steps):
        if step.host:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append(index)
    return [s for s in segments if s] or [[]]


def _entry(segments: list[list[int]], calls: dict[int, list[str]],
           steps: list[LoweredStep]) -> str:
    lines = ["void run(void **b, int64_t segment) {", "  char *arena = (char *)b[0];",
             "  (void)arena;", "  switch (segment) {"]
    for number, segment in enumerate(segments):
        lines.append(f"  case {number}:")
        for index in segment:
            lines.append(f"    /* {steps[index].group.name} */")
            lines += ["    " + line for line in calls[index]]
        lines.append("    break;")
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def _pointer(var: Var, plan: BufferPlan, layout: Layout, ctype: str) -> str:
    location = plan.locations[var]
    if location.kind == "arena":
        return f"({ctype} *)(arena + {location.offset})"
    return f"({ctype} *)b[{layout.slot(location)}]"


def _render_step(step: LoweredStep, plan: BufferPlan, layout: Layout, renderer: CRenderer,
                 blas_prefix: str) -> tuple[str, str, list[str]]:
    """(kernel definition, the source shown for it, statements of its call)."""
    if step.host:
        return "", f"host call: {step.group.host.prim.name} (NumPy reference)", []
    definition, call = "", []
    shown = []
    if step.gemm is not None:
        gemm = _gemm_call(step, plan, layout, renderer, blas_prefix)
        call += gemm
        shown.append("\n".join(gemm))
    if step.kernel is not None:
        aliases, args = _kernel_arguments(step, plan, layout, renderer)
        definition = renderer.render_kernel(step.kernel, aliases)
        call.append(f"{step.kernel.name}({', '.join(args)});")
        shown.append(definition)
    return definition, "\n".join(shown), call


def _kernel_arguments(step: LoweredStep, plan: BufferPlan, layout: Layout,
                      renderer: CRenderer) -> tuple[dict[Buffer, Buffer], list[str]]:
    """Call arguments (one per distinct memory) and the parameters that alias another."""
    var_of = {buf: var for var, buf in step.bindings.items()}
    first_at: dict[Location, Buffer] = {}
    aliases: dict[Buffer, Buffer] = {}
    args = []
    for buf in step.kernel.params:
        location = plan.locations[var_of[buf]]
        if location in first_at:
            aliases[buf] = first_at[location]
            continue
        first_at[location] = buf
        args.append(_pointer(var_of[buf], plan, layout, renderer.storage_types[buf.dtype.name]))
    return aliases, args


def _gemm_call(step: LoweredStep, plan: BufferPlan, layout: Layout, renderer: CRenderer,
               prefix: str) -> list[str]:
    gemm = step.gemm
    ctype = renderer.storage_types[gemm.dtype.name]
    a = _pointer(step.gemm_operands[0], plan, layout, ctype)
    b = _pointer(step.gemm_operands[1], plan, layout, ctype)
    c = _pointer(step.group.library.outputs[0], plan, layout, ctype)
    return render_gemm(gemm, a, b, c, ctype, prefix, renderer.threads)


def _kernel_info(step: LoweredStep, source: str) -> KernelInfo:
    group = step.group
    if step.host:
        eqn = group.host
        lines = [eqn.source.short()] if eqn.source is not None else []
        return KernelInfo(group.name, source, [eqn.prim.name], lines, "host",
                          group.why_boundary())
    ops, lines = [], []
    if step.gemm is not None:
        ops.append("dot_general")
        eqn = group.library
        if eqn.source is not None:
            lines.append(eqn.source.short())
    if step.kernel is not None:
        ops += step.kernel.ops
        lines += [line for line in step.kernel.source_lines if line not in lines]
    kind = "library" if step.gemm is not None else "kernel"
    return KernelInfo(group.name, source, ops, lines, kind, group.why_boundary())
