"""Shrinking: smaller choices and fewer steps while the failure persists."""
from __future__ import annotations

import numpy as np

from ember.fuzz.choices import RandomChoices
from ember.fuzz.generate import Limits, generate
from ember.fuzz.program import Program
from ember.fuzz.runner import Failure
from ember.fuzz.shrink import _Budget, shrink, shrink_choices, shrink_steps


def _uses(program: Program, op: str) -> bool:
    return any(step.expr.startswith(op) for step in program.steps)


def _big_program_using(op: str) -> tuple[list[int], Program]:
    for i in range(500):
        choices = RandomChoices(f"shrink:{i}")
        program = generate(choices)
        if _uses(program, op) and len(program.steps) >= 5:
            return choices.recorded, program
    raise AssertionError(f"no program with {op}")


def test_choices_shrink_to_one_step_keeping_the_failing_operation():
    answers, _ = _big_program_using("lax.dot_general")
    calls = []

    def fails(candidate: Program) -> bool:
        calls.append(candidate)
        return _uses(candidate, "lax.dot_general")

    small_answers, small = shrink_choices(answers, fails, Limits(), _Budget(2000))
    assert _uses(small, "lax.dot_general") and len(small.steps) == 1
    assert len(small_answers) < len(answers)
    assert all(d <= 1 for i in small.inputs for d in i.aval.shape)  # shapes shrank too
    assert len(calls) < 2000


def test_steps_shrink_by_cutting_and_dropping():
    _, program = _big_program_using("lax.scan")
    small = shrink_steps(program, lambda p: _uses(p, "lax.scan"), _Budget(1000))
    assert [s.expr.split("(")[0] for s in small.steps] == ["lax.scan"]
    read = set(small.steps[0].args)
    assert {i.name for i in small.inputs} == read  # only what the scan reads is left


def test_budget_bounds_the_work():
    answers, _ = _big_program_using("lax.gather")
    calls = []
    shrink_choices(answers, lambda p: calls.append(p) or True, Limits(), _Budget(5))
    assert len(calls) == 5


def test_shrink_of_a_real_failure_keeps_its_signature(monkeypatch):
    """A target made wrong for graphs with a dot_general shrinks to a one-op program."""
    from ember.fuzz import targets

    original = targets.optimized_on_reference

    def broken(fn, args, pipeline="cpu"):
        outs = original(fn, args, pipeline)
        if any(e.prim.name == "dot_general" for e in targets._reference_graph(fn, args).eqns):
            return [np.logical_not(o) if o.dtype == bool else o + 1 for o in map(np.asarray, outs)]
        return outs

    monkeypatch.setitem(targets.__dict__, "optimized_on_reference", broken)
    answers, program = _big_program_using("lax.dot_general")
    failure = Failure(program, "plain", "reference:passes", "mismatch", "")
    small = shrink(failure, answers, tries=400)
    assert small.signature() == failure.signature()
    assert [s.expr.split("(")[0] for s in small.program.steps] == ["lax.dot_general"]
    assert small.detail.startswith("output 0:")


def test_steps_of_the_same_type_are_bypassed():
    from ember.core.abstract import ShapedArray
    from ember.fuzz.program import Input, Step

    f32 = ShapedArray((2,), np.float32)
    program = Program((Input("x0", f32),), (
        Step("v0", f32, "lax.tanh({0})", ("x0",)),
        Step("v1", f32, "lax.neg({0})", ("v0",)),
        Step("v2", f32, "lax.neg({0})", ("v1",)),
        Step("v3", f32, "lax.add({0}, {1})", ("v2", "x0"))))
    small = shrink_steps(program, lambda p: _uses(p, "lax.tanh"), _Budget(100))
    assert [s.line() for s in small.steps] == ["v0 = lax.tanh(x0)"]
