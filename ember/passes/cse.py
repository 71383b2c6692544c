"""Common subexpression elimination: an equation that repeats an earlier one (same
primitive, same operands, same params) reuses the earlier results.

Every primitive is pure (random bits too: keys are explicit). Operands of commutative
primitives are compared as a set (``a + b`` is ``b + a``, exactly, in IEEE arithmetic).
Each nested graph is its own scope: values are never shared across a body boundary.
Equations whose params cannot be compared (unhashable values) are left alone.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Hashable

import numpy as np

from ember.ir.graph import Atom, Eqn, Graph, Literal, Var, has_effects
from ember.passes.rewrite import in_subgraphs, substitute_inputs, substitute_outputs

COMMUTATIVE = frozenset({"add", "mul", "max", "min", "and", "or", "xor", "eq", "ne"})


def cse(graph: Graph) -> Graph:
    """``graph`` with repeated computations replaced by their first occurrence."""
    env: dict[Var, Atom] = {}
    seen: dict[Hashable, Eqn] = {}
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        eqn = in_subgraphs(substitute_inputs(eqn, env), cse)
        key = _key(eqn)
        earlier = seen.get(key) if key is not None else None
        if earlier is None:
            if key is not None:
                seen[key] = eqn
            eqns.append(eqn)
            continue
        env.update(zip(eqn.outputs, earlier.outputs))
    return substitute_outputs(graph, eqns, env)


def _atom_key(atom: Atom) -> Hashable:
    if isinstance(atom, Literal):
        return ("literal", atom.aval.dtype.str, atom.value.tobytes())
    return atom


def _key(eqn: Eqn) -> Hashable | None:
    if has_effects(eqn):
        return None  # two prints of one value are two prints
    inputs: Hashable = tuple(_atom_key(atom) for atom in eqn.inputs)
    if eqn.prim.name in COMMUTATIVE:
        inputs = frozenset(Counter(inputs).items())  # the operands as a multiset
    key = (eqn.prim.name, inputs, _freeze(eqn.params))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _freeze(value: Any) -> Hashable:
    """A hashable stand-in for a param value that compares as the value does."""
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, Graph):
        return ("graph", id(value))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_freeze(v) for v in value))
    if isinstance(value, float) and value != value:
        return ("nan",)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (type(value), tuple(_freeze(getattr(value, f.name)) for f in fields))
    return (type(value), value)

