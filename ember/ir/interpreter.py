"""Evaluate a Graph equation by equation.

With the default ``apply`` this is the reference backend: every primitive runs its
NumPy reference implementation. Transformations re-trace a graph by passing
``apply=bind_equation`` so each equation is bound again under the active interpreters.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core.primitive import Primitive
from ember.ir.graph import Graph, Literal, Var

Apply = Callable[[Primitive, list, dict], Any]


def reference_apply(prim: Primitive, values: list, params: dict) -> Any:
    if prim.impl_rule is None:
        raise NotImplementedError(f"primitive {prim.name} has no reference implementation")
    return prim.impl_rule(*values, **params)


def reference_results(prim: Primitive, values: list, params: dict) -> list:
    """``reference_apply``'s results as a list (of one, for a single-result primitive)."""
    outs = reference_apply(prim, values, params)
    return outs if prim.multiple_results else [outs]


def bind_equation(prim: Primitive, values: list, params: dict) -> Any:
    return prim.bind(*values, **params)


def eval_graph(graph: Graph, args: Sequence[Any], apply: Apply = reference_apply,
               consts: Sequence[Any] | None = None) -> list[Any]:
    """Run ``graph`` on ``args`` (after its constants); returns the list of outputs."""
    env: dict[Var, Any] = {}
    constvals = graph.constvals if consts is None else consts
    if len(args) != len(graph.inputs):
        raise ValueError(f"graph takes {len(graph.inputs)} inputs, got {len(args)}")
    for var, value in zip(graph.constvars, constvals):
        env[var] = value
    for var, value in zip(graph.inputs, args):
        env[var] = value

    def read(atom):
        if isinstance(atom, Literal):
            return atom.value
        return env[atom]

    for eqn in graph.eqns:
        outs = apply(eqn.prim, [read(a) for a in eqn.inputs], eqn.params)
        if not eqn.prim.multiple_results:
            outs = [outs]
        for var, value in zip(eqn.outputs, outs):
            env[var] = value
    return [read(atom) for atom in graph.outputs]


def as_numpy(value: Any, dtype: np.dtype) -> np.ndarray:
    """Coerce a reference result to exactly the dtype the abstract eval promised."""
    array = np.asarray(value)
    return array if array.dtype == dtype else array.astype(dtype)
