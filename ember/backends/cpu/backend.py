"""The native CPU backend: the compiler pipeline (``ember.compiler.pipeline``) optimizes,
fuses and lowers the graph, renders it as one C module (kernels, BLAS calls, an entry
point; ``ember.compiler.c_module``) and compiles that with the system C compiler through
the persistent compile cache; ``CpuTarget`` is what is particular to C. A program
compiled before, in this process or another, is found by its graph in the program
cache (``program_cache``) before any of that runs.

Buffers are NumPy arrays in host memory, as with the reference backend, so eager
operations run the NumPy reference (one primitive at a time gains nothing from code
generation); ``compile`` is where the speed is.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ember.backends.base import Backend, Executable, literal_result
from ember.backends.cpu import program_cache, toolchain
from ember.backends.cpu.control import control_runner
from ember.backends.cpu.executable import CpuExecutable, HostCall, Reshaped, entry_point
from ember.backends.cpu.launcher import start_launcher
from ember.codegen import c_sort
from ember.codegen.c import CRenderer
from ember.compiler.c_module import GEMM_WRAPPER_COST, Layout, Module, build_module
from ember.compiler.steps import LoweredStep
from ember.compiler.pipeline import Compilation, compile_program, schedule_text, source_name
from ember.codegen.policy import gemm_eligible, native
from ember.config import config
from ember.core.primitive import Primitive
from ember.ir.graph import Eqn, Graph, Literal, Var
from ember.ir.interpreter import reference_apply
from ember.passes.fusion import FusionPolicy
from ember.passes.memory import BufferPlan
from ember.passes.schedule import Schedule
from ember.runtime.compile_cache import default_cache

# Integer overflow wraps, as in NumPy; a * b + c may be one fused multiply-add (one
# rounding instead of two, as XLA does): ~20% off compute-bound kernels (ISO C mode
# would otherwise keep them apart).
_EXTRA_FLAGS = ("-fwrapv", "-ffp-contract=fast")


class CpuBackend(Backend):
    name = "cpu"

    def is_available(self) -> bool:
        return toolchain.find_toolchain() is not None

    def apply_primitive(self, prim: Primitive, buffers: list, params: dict) -> Any:
        return reference_apply(prim, buffers, params)

    def compile(self, graph: Graph, donated: Sequence[bool] = ()) -> Executable:
        executable = self._cached_or_compiled(graph, donated)
        # Only now: it competes with nothing on the way to the first call, which
        # releases the GIL and can do without it.
        start_launcher()
        return executable

    def _cached_or_compiled(self, graph: Graph, donated: Sequence[bool]) -> CpuExecutable:
        flags = {name: getattr(config, name) for name in _COMPILE_FLAGS}
        key = None
        if not config.dump_dir:  # a dump shows every stage: compile it all
            key = program_cache.program_key(graph, donated, _settings(flags))
        if key is not None:
            executable = self._load(key, graph, donated, flags)
            if executable is not None:
                return executable
        executable = compile_program(graph, self.name, CpuTarget(self.compile),
                                     donated=donated).executable
        if key is not None and executable.cache_entry is not None:
            program_cache.store(key, executable.cache_entry)
        return executable

    def _load(self, key: list[str], graph: Graph, donated: Sequence[bool],
              flags: dict[str, Any]) -> CpuExecutable | None:
        """The executable of a program-cache hit, or None. Its optimized graph, kernels
        and analyses are generated again only when read."""
        native = program_cache.load(key, graph)
        path = default_cache().find(native.library, ".so") if native is not None else None
        if path is None:
            return None
        library = toolchain.load_library(path)
        executable = CpuExecutable.described_later(
            graph, lambda: _describe(graph, donated, flags, self.compile))
        executable.library = library
        return executable.configure(entry=entry_point(library), **native.configure_args(graph))


class CpuTarget:
    """The C target of the compiler pipeline: one C module per program (kernels, BLAS
    and sort calls, the entry point), built by the system C compiler and loaded with
    ctypes. ``compile_body`` compiles the bodies of control flow run by host calls (like
    programs of their own)."""

    source_suffix = ".c"

    def __init__(self, compile_body: Callable[[Graph], Executable]) -> None:
        threads = num_threads()
        self.renderer = CRenderer(threads, vector_math_functions())
        self.policy = cpu_policy(self.renderer)
        # (fold affine epilogues into the BLAS calls)
        self.lowering = {"threads": threads, "fold_affine": True}
        self.compile_body = compile_body

    def render(self, program: Compilation) -> Module:
        linked = (any(step.gemm is not None for step in program.steps)
                  and toolchain.links_gemm_wrapper())
        return build_module(program.steps, program.plan, _layout(program), self.renderer,
                            max_units=toolchain.parallel_jobs(), hold_team=config.pin_threads,
                            profile=config.profile,
                            gemm_wrapper_cost=0 if linked else GEMM_WRAPPER_COST)

    def build(self, program: Compilation) -> Path:
        return toolchain.compile_shared_library(program.source.units,
                                                **_build_options(program.source))

    def build_command(self, program: Compilation) -> str:
        return toolchain.build_command(program.source.units, **_build_options(program.source))

    def load(self, program: Compilation) -> CpuExecutable:
        library = toolchain.load_library(program.binary)
        made = dataclasses.replace(program)  # (what the stages made: not the executable)
        executable = CpuExecutable.described_later(program.graph, lambda: _details(made))
        executable.library = library  # keeps the shared object loaded
        plan = program.plan
        args = {"layout": _layout(program),
                "program": _program(program.steps, program.source.segments, plan,
                                    self.compile_body),
                "constants": program.optimized.constvals,
                "output_avals": [v.aval for v in program.outputs()],
                "results": _results(program.optimized, plan), "arena_bytes": plan.arena_bytes}
        executable.configure(entry=entry_point(library), **args)
        executable.cache_entry = program_cache.describe(program.binary, program.graph, **args)
        return executable


def cpu_policy(renderer: CRenderer) -> FusionPolicy:
    """What C computes natively: what the renderer's tables cover, GEMMs as BLAS calls
    where a BLAS is installed, sorts as functions of the module (``c_sort``)."""
    return FusionPolicy(native=functools.partial(native, renderer), library=_blas_gemm,
                        call=c_sort.supported, casts_operands=True, host_reads_reshapes=True)


def _build_options(module: Module) -> dict[str, Any]:
    """How ``toolchain`` builds ``module``'s units: name, BLAS, extra flags."""
    return {"name": source_name(module.units), "link_blas": module.uses_blas,
            "extra_flags": extra_flags()}


def _blas_gemm(eqn: Eqn) -> bool:
    """Whether ``eqn`` runs as a BLAS GEMM call (16-bit operands: where Ember's GEMM is
    linked)."""
    if eqn.prim.name != "dot_general":  # (first: fusion asks of every equation, and
        return False                     # finding the BLAS takes tens of microseconds)
    info = toolchain.blas()
    return info is not None and gemm_eligible(eqn, half=info.half)


def _layout(program: Compilation) -> Layout:
    host = sum(1 for loc in program.plan.locations.values() if loc.kind == "host")
    return Layout(len(program.inputs()), len(program.outputs()), host)


def _details(program: Compilation) -> dict[str, Any]:
    """The fields of ``Executable`` that describe the compiled program (computed when
    first read: costs, memory and the schedule's text take milliseconds)."""
    schedule = program.schedule
    graph = schedule.graph
    return {"optimized": graph, "kernels": program.source.kernels, "cost": _cost(schedule),
            "memory": _memory(program.plan, program.inputs(), program.outputs()),
            "schedule_text": schedule_text(schedule)}


def _describe(graph: Graph, donated: Sequence[bool], flags: dict[str, Any],
              compile_body: Callable[[Graph], Executable]) -> dict[str, Any]:
    """The details of a program, generated under the flags it was compiled with."""
    changed = {name: value for name, value in flags.items() if getattr(config, name) != value}
    with config.override(**changed):
        return _details(compile_program(graph, "cpu", CpuTarget(compile_body),
                                        donated=donated, until="source"))


# The flags that change what a compile produces (``config.snapshot`` less the backend,
# plus the thread count).
_COMPILE_FLAGS = ("enable_x64", "optimize", "debug_nans", "sanitize", "cflags", "num_threads",
                  "pin_threads", "blas", "profile")


def _settings(flags: dict[str, Any]) -> list[str]:
    """Program-cache key parts for the backend's settings: flags, resolved thread count,
    and what the toolchain adds (compiler, target, C flags, headers, BLAS)."""
    return [repr(sorted(flags.items())), f"threads={num_threads()}",
            *toolchain.library_identity(extra_flags())]


def extra_flags() -> tuple[str, ...]:
    """Flags beyond the toolchain's: wrapping integers; the widest vectors the CPU has.
    GCC prefers 256-bit vectors on AVX-512 CPUs, which halves the throughput of the
    compute-bound fused loops, and 128-bit ones on AMD's first Zen, which splits a
    256-bit operation in two: its fused loops of transcendental functions still run
    13-15% faster with 256-bit vectors (half the instructions)."""
    if not toolchain.find_toolchain().target_isa.startswith("x86_64"):
        return _EXTRA_FLAGS
    features = toolchain.cpu_flags()
    if "avx512f" in features:
        return (*_EXTRA_FLAGS, "-mprefer-vector-width=512")
    if "avx2" in features:
        return (*_EXTRA_FLAGS, "-mprefer-vector-width=256")
    return _EXTRA_FLAGS


def num_threads() -> int:
    return max(1, int(config.num_threads or os.cpu_count() or 1))


@functools.cache
def _vector_math(header: str) -> frozenset[str]:
    return frozenset(re.findall(r"\bember_([a-z0-9]+)f\s*\(", header))


def vector_math_functions() -> frozenset[str]:
    """float32 math functions ``ember_math.h`` defines (``ember_expf`` -> 'exp')."""
    path = Path(toolchain.INCLUDE_DIR) / "ember_math.h"
    return _vector_math(path.read_text() if path.exists() else "")


def _program(steps: list[LoweredStep], segments: list[list[int]], plan: BufferPlan,
             compile_graph) -> list:
    """Segment numbers and host calls in execution order."""
    segment_of = {index: number for number, segment in enumerate(segments) for index in segment}
    # (a value written into the output that reshapes it: read in its own shape)
    reshaped_places = {plan.locations[v] for v in plan.views}
    program: list = []
    for index, step in enumerate(steps):
        if step.host:
            eqn, views = step.group.host, step.group.host_reads
            inputs = [literal_result(a) if isinstance(a, Literal)
                      else Reshaped(plan.locations[views[i]]) if i in views
                      else Reshaped(plan.locations[a]) if plan.locations[a] in reshaped_places
                      else plan.locations[a] for i, a in enumerate(eqn.inputs)]
            outputs = [plan.locations.get(v) for v in eqn.outputs]
            program.append(HostCall(eqn, inputs, outputs, control_runner(eqn, compile_graph),
                                    step=index))
        elif not program or program[-1] != segment_of[index]:
            program.append(segment_of[index])
    return program


def _results(graph: Graph, plan: BufferPlan) -> list[tuple[str, Any]]:
    return [("literal", literal_result(atom)) if isinstance(atom, Literal)
            else ("buffer", (plan.locations[atom], atom)) for atom in graph.outputs]


def _cost(schedule: Schedule) -> dict[str, float]:
    from ember.passes.analysis import cost_of_graph

    traffic = sum(v.aval.nbytes for group in schedule.groups
                  for v in [*group.reads(), *group.writes()])
    return {"flops": cost_of_graph(schedule.graph)["flops"], "bytes accessed": float(traffic)}


def _memory(plan: BufferPlan, inputs: list[Var], outputs: list[Var]) -> dict[str, int]:
    arguments = sum(v.aval.nbytes for v in inputs)
    aliased = sum(v.aval.nbytes for v, _ in plan.in_place if v in set(outputs)
                  and plan.locations[v].kind == "input")
    result = sum(v.aval.nbytes for v in outputs) - aliased
    host = sum(v.aval.nbytes for v, loc in plan.locations.items() if loc.kind == "host")
    temp = plan.arena_bytes + host
    return {"argument_bytes": arguments, "output_bytes": result, "temp_bytes": temp,
            "alias_bytes": aliased, "peak_bytes": arguments + result + temp}

