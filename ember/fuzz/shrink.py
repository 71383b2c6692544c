"""Shrinking a failing program to a small one that fails the same way.

Two passes, each keeping a candidate only if it still fails with the same signature
(variant, target, kind, error type):

1. on the recorded choices (when the program came from ``RandomChoices``): delete
   runs of answers, set answers to 0, halve them. Fewer or smaller answers mean fewer
   steps, smaller shapes and simpler operations. A candidate is kept only if the
   answers it consumed are smaller in shortlex order, so the pass terminates.
2. on the steps: drop a step nothing reads, bypass a step (its readers read one of its
   operands of the same type instead), or cut a step loose by turning its output into a
   program input of the same type; inputs nothing reads go too.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator

from ember.fuzz.choices import ReplayChoices
from ember.fuzz.generate import DEFAULT_LIMITS, Limits, generate
from ember.fuzz.program import Input, Program
from ember.fuzz.runner import Failure, reproduce


class _Budget:
    def __init__(self, tries: int) -> None:
        self.left = tries

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _shortlex(a: list[int]) -> tuple[int, list[int]]:
    return len(a), a


def _deletion(size: int) -> Callable[[list[int], int], list[int] | None]:
    def edit(answers: list[int], at: int) -> list[int] | None:
        return answers[:at] + answers[at + size:] if at + size <= len(answers) else None
    return edit


def _lowering(divisor: int) -> Callable[[list[int], int], list[int] | None]:
    def edit(answers: list[int], at: int) -> list[int] | None:
        value = answers[at]
        return answers[:at] + [value // divisor] + answers[at + 1:] if value else None
    return edit


_EDITS = (_deletion(8), _deletion(4), _deletion(2), _deletion(1), _lowering(2**62), _lowering(2))


def shrink_choices(answers: list[int], fails: Callable[[Program], bool], limits: Limits,
                   budget: _Budget) -> tuple[list[int], Program]:
    """The smallest answers found whose program still ``fails``, and that program.

    Each edit walks the answers from the end to the start; after a success it retries at
    the same place (the following answers have moved there), so a pass is linear.
    """
    best, best_program = answers, generate(ReplayChoices(answers), limits)
    improved = True
    while improved:
        improved = False
        for edit in _EDITS:
            at = len(best) - 1
            while at >= 0:
                candidate = edit(best, at)
                at -= 1
                if candidate is None:
                    continue
                replay = ReplayChoices(candidate)
                program = generate(replay, limits)
                if _shortlex(replay.recorded) >= _shortlex(best):
                    continue
                if not budget.spend():
                    return best, best_program
                if fails(program):
                    best, best_program, improved = replay.recorded, program, True
                    at = min(at + 1, len(best) - 1)
    return best, best_program


def _bypassed(program: Program, index: int, by: str) -> Program:
    """``program`` without step ``index``, whose readers read ``by`` instead."""
    gone = program.steps[index].out
    steps = tuple(replace(s, args=tuple(by if a == gone else a for a in s.args))
                  for s in program.steps[:index] + program.steps[index + 1:])
    return replace(program, steps=steps).without_unused_inputs()


def _step_edits(program: Program) -> Iterator[Program]:
    """Drop a step nothing reads; bypass a step that has an operand of its own type;
    cut a step loose (its output becomes an input)."""
    read = {name for step in program.steps for name in step.args}
    avals = program.avals()
    for i in range(len(program.steps) - 1, -1, -1):
        step = program.steps[i]
        if step.out not in read:
            if len(program.steps) > 1:
                yield replace(program, steps=program.steps[:i] + program.steps[i + 1:]
                              ).without_unused_inputs()
            continue
        for arg in dict.fromkeys(step.args):
            if avals[arg] == step.aval:
                yield _bypassed(program, i, arg)
        for edges in (False, True):
            cut = Input(step.out, step.aval, edges=edges)
            yield replace(program, inputs=program.inputs + (cut,),
                          steps=program.steps[:i] + program.steps[i + 1:]).without_unused_inputs()


def shrink_steps(program: Program, fails: Callable[[Program], bool], budget: _Budget) -> Program:
    improved = True
    while improved:
        improved = False
        for candidate in _step_edits(program):
            if not budget.spend():
                return program
            if fails(candidate):
                program, improved = candidate, True
                break
    return program


def shrink(failure: Failure, answers: list[int] | None = None, limits: Limits = DEFAULT_LIMITS,
           tries: int = 200) -> Failure:
    """A failure like ``failure`` on as small a program as ``tries`` runs can find
    (two thirds of them for the choices, the rest and what is left for the steps)."""
    smallest = [failure]

    def fails(program: Program) -> bool:
        found = reproduce(program, failure)
        if found is not None:
            smallest[0] = found
        return found is not None

    choice_budget = _Budget(2 * tries // 3 if answers is not None else 0)
    if answers is not None:
        shrink_choices(answers, fails, limits, choice_budget)
    shrink_steps(smallest[0].program, fails, _Budget(tries // 3 + max(choice_budget.left, 0)))
    return smallest[0]
