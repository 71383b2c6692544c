"""The Graph: Ember's typed SSA intermediate representation.

A Graph has typed input variables, a list of equations (a primitive applied to
variables or literals, producing new variables) and outputs. Every value has a shape
and dtype (a ``ShapedArray``); every equation keeps the user's source location.
Top-level graphs may carry constants (arrays captured from the Python closure);
graphs nested in control-flow params never do: their captured values are explicit
operands.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.core.source_info import SourceInfo


class Var:
    """A value defined once: a graph input, a constant or an equation output."""

    __slots__ = ("aval", "hint")

    def __init__(self, aval: ShapedArray, hint: str = "") -> None:
        self.aval = aval
        self.hint = hint  # preferred printed name (from the parser); printing stays unique

    def __repr__(self) -> str:
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant written directly in an equation."""

    __slots__ = ("value", "aval")

    def __init__(self, value: Any, aval: ShapedArray) -> None:
        self.value = np.asarray(value, dtype=aval.dtype)
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({self.value.item()!r}:{self.aval.str_short()})"


Atom = Var | Literal


@dataclass
class Eqn:
    prim: Primitive
    inputs: list[Atom]
    outputs: list[Var]
    params: dict[str, Any]
    source: SourceInfo | None = None

    def replace(self, **changes: Any) -> "Eqn":
        return dataclasses.replace(self, **changes)


@dataclass
class Graph:
    inputs: list[Var]
    outputs: list[Atom]
    eqns: list[Eqn]
    constvars: list[Var] = field(default_factory=list)
    constvals: list[Any] = field(default_factory=list)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.inputs]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outputs]

    def replace(self, **changes: Any) -> "Graph":
        return dataclasses.replace(self, **changes)

    def __str__(self) -> str:
        return self.pretty_print()

    def pretty_print(self, source: bool = True) -> str:
        from ember.ir.printer import print_graph

        return print_graph(self, source=source)


def substitute(atom: Atom, env: Mapping[Var, Atom]) -> Atom:
    """``atom`` read through a renaming ``env`` (literals and unrenamed variables stay)."""
    return env.get(atom, atom) if isinstance(atom, Var) else atom


def subgraphs(params: dict[str, Any]) -> Iterable[Graph]:
    """The graphs nested in an equation's params (control-flow bodies, branches)."""
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, Graph):
                yield item


def map_subgraphs(params: dict[str, Any],
                  fn: Callable[[Graph], Graph]) -> dict[str, Any]:
    """``params`` with ``fn`` applied to every nested graph (the same dict if none)."""
    changed = {}
    for key, value in params.items():
        if isinstance(value, Graph):
            changed[key] = fn(value)
        elif isinstance(value, (tuple, list)) and any(isinstance(v, Graph) for v in value):
            items = [fn(v) if isinstance(v, Graph) else v for v in value]
            changed[key] = type(value)(items)
    return {**params, **changed} if changed else params


def has_effects(eqn: Eqn) -> bool:
    """True if ``eqn`` or an equation nested in its params is effectful (must run)."""
    return eqn.prim.effectful or any(has_effects(inner) for sub in subgraphs(eqn.params)
                                     for inner in sub.eqns)


def all_eqns(graph: Graph) -> Iterator[Eqn]:
    """Every equation of ``graph``, those of its nested graphs included."""
    for eqn in graph.eqns:
        yield eqn
        for sub in subgraphs(eqn.params):
            yield from all_eqns(sub)


def uses(graph: Graph) -> dict[Var, int]:
    """How many times each variable is read (by equations or as an output)."""
    read = [*(atom for eqn in graph.eqns for atom in eqn.inputs), *graph.outputs]
    return dict(Counter(atom for atom in read if isinstance(atom, Var)))
