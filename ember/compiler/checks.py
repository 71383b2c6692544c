"""What the pipeline checks after each stage when ``config.verify`` is on (the test
suite turns it on): the invariants the next stage relies on. A failed check raises
``VerificationError``, which the driver prefixes with the stage that broke it."""
from __future__ import annotations

from ember.codegen.kernel_ir import Let, Load, Scratch, Store
from ember.compiler.steps import LoweredStep
from ember.ir.graph import Var
from ember.ir.verifier import VerificationError, verify
from ember.passes.memory import BufferPlan
from ember.passes.schedule import Schedule


def check_schedule(schedule: Schedule) -> None:
    """Groups in an order that runs: each reads what exists by then (inputs, constants,
    what an earlier group wrote), each value is written once, every output is."""
    graph = schedule.graph
    verify(graph)
    ready = {*graph.inputs, *graph.constvars}
    for group in schedule.groups:
        missing = [v for v in group.reads() if v not in ready]
        if missing:
            raise VerificationError(f"{group.name} reads {len(missing)} value(s) that no "
                                    f"earlier group writes")
        for var in group.writes():
            if var in ready:
                raise VerificationError(f"{group.name} writes a value that exists already")
            ready.add(var)
    if any(isinstance(v, Var) and v not in ready for v in graph.outputs):
        raise VerificationError("no group computes an output of the program")


def check_kernels(steps: list[LoweredStep]) -> None:
    """Each kernel touches only its parameters (or its own scratch arrays), and each
    parameter is bound to a value of the program."""
    for step in steps:
        if step.kernel is None:
            continue
        params = set(step.kernel.params)
        if params - set(step.bindings.values()):
            raise VerificationError(f"{step.kernel.name} has a parameter bound to no value")
        for stmt in step.kernel.walk():
            if isinstance(stmt, (Store, Scratch)):
                buffer = stmt.buffer
            elif isinstance(stmt, Let) and isinstance(stmt.node, Load):
                buffer = stmt.node.buffer
            else:
                continue
            if not buffer.scratch and buffer not in params:
                raise VerificationError(f"{step.kernel.name} touches {buffer.name}, which "
                                        f"is not one of its parameters")


def check_plan(plan: BufferPlan, steps: list[LoweredStep]) -> None:
    """Every value a step reads has a place, and the arena holds every value in it."""
    for step in steps:
        if any(v not in plan.locations for v in step.step().reads):
            raise VerificationError(f"{step.group.name} reads a value with no buffer")
    for var, location in plan.locations.items():
        if location.kind == "arena" and location.offset + var.aval.nbytes > plan.arena_bytes:
            raise VerificationError(f"a value of {var.aval.nbytes} bytes at offset "
                                    f"{location.offset} overflows the arena of "
                                    f"{plan.arena_bytes} bytes")
