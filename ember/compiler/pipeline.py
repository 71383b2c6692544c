"""The compiler pipeline of every backend, from a traced Graph to an executable.

    graph_passes → absorb_into_contractions → fusion → kernel_ir → buffer_plan
        → source → binary → executable

``PIPELINES`` lists the stages of each backend; ``compile_program`` runs them: one
driver that every backend shares. A stage is a named function of the ``Compilation``
so far that returns what it makes (the field ``Stage.makes`` it fills). What differs
per target (the fusion policy, how to lower, render, build and load) comes from the
backend's ``Target``. Around every stage the driver

- checks what the stage made while ``config.verify`` is on (``EMBER_VERIFY=1``; on in
  the test suite), naming the stage that broke an invariant (``checks.py``);
- prints its time under ``EMBER_LOG=compile``;
- writes what it made to the program's folder under ``EMBER_DUMP=dir`` (``ember.ir.dump``).

Buffers are planned after lowering: a kernel may write an output over an input only
where it reads and writes them at the same positions, which the kernel IR tells. The
GPU backends plan no buffers: their executables free each temporary after its last
use. The reference backend runs the graph passes only.
"""
from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ember.compiler import checks
from ember.compiler.steps import LoweredStep, lower_schedule, steps_text
from ember.config import config
from ember.ir.dump import Dump
from ember.ir.graph import Graph, Var
from ember.ir.printer import print_graph, var_names
from ember.ir.verifier import VerificationError, verify
from ember.passes import fusion as fusion_pass, pipeline as graph_pipeline
from ember.passes.fusion import FusionPolicy
from ember.passes.memory import BufferPlan, plan_buffers
from ember.passes.schedule import Schedule

if TYPE_CHECKING:  # (backends use the pipeline, not the other way round)
    from ember.backends.base import Executable


class Target(Protocol):
    """What differs per target, for the stages after the graph passes."""

    policy: FusionPolicy  # what fusion may compute in kernels and library calls
    lowering: dict[str, Any]  # keyword arguments of ``lower_schedule``
    source_suffix: str  # of the dumped source: '.c', '.cu', '.cl'

    def render(self, program: Compilation) -> Any:
        """The source: an object whose ``units`` are its translation units."""

    def build(self, program: Compilation) -> Any:
        """The binary of ``program.source`` (through the compile cache)."""

    def build_command(self, program: Compilation) -> str:
        """How ``build`` compiles, as a command a person can rerun."""

    def load(self, program: Compilation) -> Executable:
        """The executable of ``program.binary``."""


@dataclass
class Compilation:
    """A program on its way through the pipeline: what the stages made so far."""

    graph: Graph  # as traced
    backend: str
    target: Target | None = None  # (None: the reference backend, graph passes only)
    donated: Sequence[bool] = ()
    dump: Dump | None = None
    optimized: Graph | None = None
    absorbed: Graph | None = None
    schedule: Schedule | None = None
    steps: list[LoweredStep] | None = None
    plan: BufferPlan | None = None
    source: Any = None
    binary: Any = None
    executable: Executable | None = None

    def inputs(self) -> list[Var]:
        """Arguments, then constants: the buffers a call is given."""
        return [*self.optimized.inputs, *self.optimized.constvars]

    def outputs(self) -> list[Var]:
        """The distinct outputs some step computes (not inputs, not literals)."""
        written = {v for step in self.steps for v in step.group.writes()}
        return list(dict.fromkeys(v for v in self.optimized.outputs
                                  if isinstance(v, Var) and v in written))


# --- the stages ---------------------------------------------------------------------

def graph_passes(program: Compilation) -> Graph:
    """The backend's graph passes (``ember.passes.pipeline``; they dump and check each)."""
    return graph_pipeline.run_pipeline(program.graph, program.backend, dump=program.dump)


def absorb_into_contractions(program: Compilation) -> Graph:
    return fusion_pass.absorb_into_contractions(program.optimized, program.target.policy)


def fusion(program: Compilation) -> Schedule:
    return fusion_pass.schedule_groups(program.absorbed, program.target.policy)


def kernel_ir(program: Compilation) -> list[LoweredStep]:
    return lower_schedule(program.schedule, **program.target.lowering)


def buffer_plan(program: Compilation) -> BufferPlan:
    inputs = program.inputs()
    donated = [*program.donated, *[False] * len(inputs)][:len(inputs)]
    return plan_buffers([s.step() for s in program.steps], inputs, donated, program.outputs())


def source(program: Compilation) -> Any:
    return program.target.render(program)


def binary(program: Compilation) -> Any:
    return program.target.build(program)


def executable(program: Compilation) -> Executable:
    return program.target.load(program)


# --- what each stage dumps ------------------------------------------------------------

def schedule_text(schedule: Schedule) -> str:
    """The schedule's listing, values named as the printed graph names them."""
    names = var_names(schedule.graph)
    return schedule.text(lambda var: names.get(var, "?"))


def _plan_text(program: Compilation) -> str:
    names = var_names(program.schedule.graph)
    plan = program.plan
    lines = [f"arena: {plan.arena_bytes} bytes"]
    for var, location in plan.locations.items():
        where = f"+{location.offset}" if location.kind == "arena" else f"#{location.slot}"
        lines.append(f"{names.get(var, '?')}:{var.aval.str_short()} {location.kind} {where}")
    lines += [f"{names.get(v, '?')} takes the buffer of {names.get(w, '?')}"
              for v, w in plan.in_place]
    return "\n".join(lines)


def _source_files(program: Compilation) -> list[tuple[str, str]]:
    units, suffix = program.source.units, program.target.source_suffix
    if len(units) == 1:
        return [(f"source{suffix}", units[0])]
    return [(f"source.{number}{suffix}", unit) for number, unit in enumerate(units)]


@dataclass(frozen=True)
class Stage:
    run: Callable[[Compilation], Any]
    makes: str  # the field of ``Compilation`` it fills
    check: Callable[[Compilation], None] | None = None  # under ``config.verify``
    dump: Callable[[Compilation], list[tuple[str, str]]] | None = None  # (file, text)

    @property
    def name(self) -> str:
        return self.run.__name__


_GRAPH_PASSES = Stage(graph_passes, "optimized")
_CODEGEN = [
    Stage(absorb_into_contractions, "absorbed", lambda p: verify(p.absorbed),
          lambda p: [("absorb_into_contractions.txt", print_graph(p.absorbed))]),
    Stage(fusion, "schedule", lambda p: checks.check_schedule(p.schedule),
          lambda p: [("schedule.txt", schedule_text(p.schedule))]),
    Stage(kernel_ir, "steps", lambda p: checks.check_kernels(p.steps),
          lambda p: [("kernel_ir.txt", steps_text(p.steps))]),
]
_BUILD = [
    Stage(source, "source", dump=_source_files),
    Stage(binary, "binary", dump=lambda p: [("build_command.txt",
                                             p.target.build_command(p))]),
    Stage(executable, "executable"),
]
_BUFFER_PLAN = Stage(buffer_plan, "plan", lambda p: checks.check_plan(p.plan, p.steps),
                     lambda p: [("buffer_plan.txt", _plan_text(p))])

PIPELINES: dict[str, list[Stage]] = {
    "reference": [_GRAPH_PASSES],
    "cpu": [_GRAPH_PASSES, *_CODEGEN, _BUFFER_PLAN, *_BUILD],
    "opencl": [_GRAPH_PASSES, *_CODEGEN, *_BUILD],
    "cuda": [_GRAPH_PASSES, *_CODEGEN, *_BUILD],
}


def compile_program(graph: Graph, backend: str, target: Target | None = None, *,
                    donated: Sequence[bool] = (), until: str | None = None) -> Compilation:
    """Run the stages of ``PIPELINES[backend]`` on ``graph`` (up to and including the
    stage named ``until``, if given)."""
    if backend not in PIPELINES:
        raise KeyError(f"no compiler pipeline for backend {backend!r}; pipelines: "
                       f"{sorted(PIPELINES)}")
    program = Compilation(graph, backend, target, donated, Dump.open(graph, backend))
    for stage in PIPELINES[backend]:
        start = time.perf_counter()
        setattr(program, stage.makes, stage.run(program))
        if config.log_enabled("compile"):
            print(f"ember: stage {stage.name} ({backend}) in "
                  f"{time.perf_counter() - start:.4f} s", file=sys.stderr)
        if config.verify and stage.check is not None:
            try:
                stage.check(program)
            except VerificationError as error:
                raise VerificationError(f"after stage {stage.name}: {error}") from None
        if program.dump is not None and stage.dump is not None:
            for file, text in stage.dump(program):
                program.dump.write(file, text)
        if stage.name == until:
            break
    return program


def stage_names(backend: str) -> list[str]:
    """The stages of ``backend``'s pipeline, in order (``ember info --pipeline``)."""
    return [stage.name for stage in PIPELINES[backend]]


def source_name(units: Sequence[str]) -> str:
    """A program's name, from its source: the same source, the same name."""
    return "ember_" + hashlib.sha256("\n".join(units).encode()).hexdigest()[:12]
