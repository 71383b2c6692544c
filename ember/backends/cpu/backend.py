"""The native CPU backend: the graph is optimized, fused, lowered to kernel IR, rendered
as one C module (kernels, BLAS calls, an entry point) and compiled with the system C
compiler through the persistent compile cache. A program compiled before, in this
process or another, is found by its graph in the program cache (``program_cache``)
before any of that runs.

Buffers are NumPy arrays in host memory, as with the reference backend, so eager
operations run the NumPy reference (one primitive at a time gains nothing from code
generation); ``compile`` is where the speed is.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.backends.base import Backend, Executable
from ember.backends.cpu import program_cache, toolchain
from ember.backends.cpu.control import control_runner
from ember.backends.cpu.executable import (
    CpuExecutable,
    HostCall,
    entry_point,
    literal_result,
)
from ember.backends.cpu.launcher import start_launcher
from ember.codegen.c_module import Layout, Module, build_module
from ember.compiler.policy import cpu_policy
from ember.compiler.lowering import LoweredStep, lower_schedule
from ember.codegen.c import CRenderer
from ember.config import config
from ember.core.primitive import Primitive
from ember.ir.graph import Graph, Literal, Var
from ember.ir.interpreter import reference_apply
from ember.passes.fusion import fuse
from ember.passes.memory import BufferPlan, plan_buffers
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
        timed = _Timer()
        flags = _compile_flags()
        key = None
        if not config.dump_dir:  # a dump shows every stage: compile it all
            key = timed("program key", program_cache.program_key, graph, donated,
                        _settings(flags))
        if key is not None:
            executable = timed("program cache", self._load, key, graph, donated, flags)
            if executable is not None:
                return executable
        executable, native = self._compile(graph, donated, timed)
        if key is not None and native is not None:
            program_cache.store(key, native)
        return executable

    def _compile(self, graph: Graph, donated: Sequence[bool],
                 timed: _Timer) -> tuple[CpuExecutable, program_cache.NativeProgram | None]:
        """Every stage: passes, fusion, lowering, code generation, the C compiler (or
        the compile cache)."""
        generated = _generate(graph, donated, timed)
        path = timed("cc", _build, generated.module, generated.schedule)
        library = toolchain.load_library(path)
        executable = CpuExecutable.described_later(graph, generated.details)
        executable.library = library  # keeps the shared object loaded
        optimized, plan = generated.optimized, generated.plan
        args = {"layout": generated.layout,
                "program": _program(generated.steps, generated.module.segments, plan,
                                    self._compile_body),
                "constants": optimized.constvals,
                "output_avals": [v.aval for v in generated.outputs],
                "results": _results(optimized, plan), "arena_bytes": plan.arena_bytes}
        executable.configure(entry=entry_point(library), **args)
        return executable, program_cache.describe(path, graph, **args)

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
            graph, lambda: _describe(graph, donated, flags))
        executable.library = library
        return executable.configure(entry=entry_point(library), **native.configure_args(graph))

    def _compile_body(self, graph: Graph) -> Executable:
        """A control-flow body, compiled like a program of its own."""
        return self.compile(graph)


@dataclass
class _Generated:
    """A program up to its C source: what every stage before the C compiler made."""

    optimized: Graph
    schedule: Schedule
    steps: list[LoweredStep]
    plan: BufferPlan
    layout: Layout
    outputs: list[Var]
    module: Module

    def details(self) -> dict[str, Any]:
        """The fields of ``Executable`` that describe the compiled program (computed when
        first read: costs, memory and the schedule's text take milliseconds)."""
        inputs = [*self.optimized.inputs, *self.optimized.constvars]
        graph = self.schedule.graph
        return {"optimized": graph, "kernels": self.module.kernels,
                "cost": _cost(self.schedule),
                "memory": _memory(self.plan, inputs, self.outputs),
                "schedule_text": self.schedule.text(_namer(graph))}


def _generate(graph: Graph, donated: Sequence[bool], timed: _Timer) -> _Generated:
    optimized = timed("passes", optimize, graph)
    threads = num_threads()
    renderer = CRenderer(threads, vector_math_functions())
    schedule = timed("fusion", fuse, optimized, cpu_policy(renderer))
    # (keep_rows, not grid, fold affine epilogues into the BLAS calls)
    steps = timed("lowering", lower_schedule, schedule, threads, True, False, True)
    plan, layout, outputs = timed("buffers", _plan, steps, optimized, donated)
    module = timed("codegen", build_module, steps, plan, layout, renderer,
                   toolchain.parallel_jobs(), config.pin_threads, config.profile)
    return _Generated(optimized, schedule, steps, plan, layout, outputs, module)


def _describe(graph: Graph, donated: Sequence[bool], flags: dict[str, Any]) -> dict[str, Any]:
    """The details of a program, generated under the flags it was compiled with."""
    changed = {name: value for name, value in flags.items() if getattr(config, name) != value}
    with config.override(**changed):
        return _generate(graph, donated, _Timer()).details()


class _Timer:
    """Runs compile phases; with ``EMBER_LOG=compile`` prints the time of each."""

    def __init__(self) -> None:
        self.enabled = config.log_enabled("compile")

    def __call__(self, phase: str, fn, *args):
        start = time.perf_counter()
        result = fn(*args)
        if self.enabled:
            print(f"ember: cpu {phase} {time.perf_counter() - start:.4f} s", file=sys.stderr)
        return result


def _plan(steps: list[LoweredStep], graph: Graph, donated: Sequence[bool]):
    inputs = [*graph.inputs, *graph.constvars]
    donated = [*donated, *[False] * (len(inputs) - len(donated))][:len(inputs)]
    written = {v for step in steps for v in step.group.writes()}
    outputs = list(dict.fromkeys(v for v in graph.outputs
                                 if isinstance(v, Var) and v in written))
    plan = plan_buffers([s.step() for s in steps], inputs, donated, outputs)
    return plan, Layout(len(inputs), len(outputs), _host_slots(plan)), outputs


def _build(module, schedule: Schedule) -> Path:
    name = "ember_" + hashlib.sha256(module.source.encode()).hexdigest()[:12]
    _dump(schedule, name)
    return toolchain.compile_shared_library(module.units, name=name,
                                            link_blas=module.uses_blas,
                                            extra_flags=extra_flags())


# The flags that change what a compile produces (``config.snapshot`` less the backend,
# plus the thread count).
_COMPILE_FLAGS = ("enable_x64", "optimize", "debug_nans", "sanitize", "cflags", "num_threads",
                  "pin_threads", "blas", "profile")


def _compile_flags() -> dict[str, Any]:
    return {name: getattr(config, name) for name in _COMPILE_FLAGS}


def _settings(flags: dict[str, Any]) -> list[str]:
    """Program-cache key parts for the backend's settings: flags, resolved thread count,
    and what the toolchain adds (compiler, target, C flags, headers, BLAS)."""
    return [repr(sorted(flags.items())), f"threads={num_threads()}",
            *toolchain.library_identity(extra_flags())]


def optimize(graph: Graph) -> Graph:
    """The CPU pass pipeline, once ``ember.passes.pipeline`` exists (identity before)."""
    if not config.optimize or importlib.util.find_spec("ember.passes.pipeline") is None:
        return graph
    from ember.passes.pipeline import run_pipeline

    return run_pipeline(graph, "cpu")


def extra_flags() -> tuple[str, ...]:
    """Flags beyond the toolchain's: wrapping integers; full-width AVX-512 vectors where
    the CPU has them (GCC prefers 256-bit by default, which halves the throughput of
    the compute-bound fused loops)."""
    toolchain_info = toolchain.find_toolchain()
    if toolchain_info.target_isa.startswith("x86_64") and "avx512f" in toolchain.cpu_flags():
        return (*_EXTRA_FLAGS, "-mprefer-vector-width=512")
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


def _host_slots(plan: BufferPlan) -> int:
    return sum(1 for loc in plan.locations.values() if loc.kind == "host")


def _program(steps: list[LoweredStep], segments: list[list[int]], plan: BufferPlan,
             compile_graph) -> list:
    """Segment numbers and host calls in execution order."""
    segment_of = {index: number for number, segment in enumerate(segments) for index in segment}
    program: list = []
    for index, step in enumerate(steps):
        if step.host:
            eqn = step.group.host
            inputs = [literal_result(a) if isinstance(a, Literal) else plan.locations[a]
                      for a in eqn.inputs]
            outputs = [plan.locations.get(v) for v in eqn.outputs]
            program.append(HostCall(eqn, inputs, outputs, control_runner(eqn, compile_graph),
                                    step=index))
        elif not program or program[-1] != segment_of[index]:
            program.append(segment_of[index])
    return program


def _results(graph: Graph, plan: BufferPlan) -> list[tuple[str, Any]]:
    results = []
    for atom in graph.outputs:
        if isinstance(atom, Literal):
            results.append(("literal", literal_result(atom)))
        else:
            results.append(("buffer", (plan.locations[atom], atom)))
    return results


def _cost(schedule: Schedule) -> dict[str, float]:
    from ember.passes.analysis import cost_of_graph

    graph = schedule.graph
    traffic = 0.0
    for group in schedule.groups:
        traffic += sum(v.aval.nbytes for v in group.reads())
        traffic += sum(v.aval.nbytes for v in group.writes())
    return {"flops": cost_of_graph(graph)["flops"], "bytes accessed": traffic}


def _memory(plan: BufferPlan, inputs: list[Var], outputs: list[Var]) -> dict[str, int]:
    arguments = sum(v.aval.nbytes for v in inputs)
    aliased = sum(v.aval.nbytes for v, _ in plan.in_place if v in set(outputs)
                  and plan.locations[v].kind == "input")
    result = sum(v.aval.nbytes for v in outputs) - aliased
    host = sum(v.aval.nbytes for v, loc in plan.locations.items() if loc.kind == "host")
    temp = plan.arena_bytes + host
    return {"argument_bytes": arguments, "output_bytes": result, "temp_bytes": temp,
            "alias_bytes": aliased, "peak_bytes": arguments + result + temp}


def _namer(graph: Graph):
    from ember.ir.printer import var_names

    names = var_names(graph)
    return lambda var: names.get(var, "?")


def _dump(schedule: Schedule, name: str) -> None:
    if not config.dump_dir:
        return
    folder = Path(config.dump_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.schedule.txt").write_text(schedule.text(_namer(schedule.graph)) + "\n")

