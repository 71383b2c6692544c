"""Sharding propagation: every value of a global Graph gets a split over the mesh.

Annotated values (``fixed``) keep theirs. The others start unknown, and each
equation's sharding rule proposes splits for its operands and results from what is
known; sweeps forward (program order) then backward repeat until nothing changes. A
dimension, once split, keeps its split, so the sweeps reach a fixed point (each can only
add splits, and there are finitely many). What is still unknown at the end is whole.
"""
from __future__ import annotations

from typing import Mapping

from ember.ir.graph import Eqn, Graph, Literal, Var
from ember.ops.sharding_rules import Dims, ShardingDecision, ShardingQuery, unknown

__all__ = ["propagate", "decide", "whole"]


def whole(ndim: int) -> Dims:
    return ((),) * ndim


def settled(dims: Dims) -> Dims:
    """Unknown dimensions made whole."""
    return tuple(() if axes is None else axes for axes in dims)


def decide(eqn: Eqn, inputs: list[Dims], outputs: list[Dims],
           mesh: Mapping[str, int]) -> ShardingDecision | None:
    """The equation's rule asked about the given splits (None: the primitive has no
    rule, so it runs on whole operands)."""
    rule = eqn.prim.sharding_rule
    if rule is None:
        return None
    query = ShardingQuery(inputs, outputs, [a.aval for a in eqn.inputs],
                          [v.aval for v in eqn.outputs], eqn.params, mesh)
    return rule(query)


def propagate(graph: Graph, mesh: Mapping[str, int],
              fixed: Mapping[Var, Dims]) -> dict[Var, Dims]:
    """The split of every Var of ``graph`` (inputs, constants, equation results)."""
    specs: dict[Var, Dims] = {}
    for var in [*graph.inputs, *graph.constvars]:
        specs[var] = fixed.get(var, unknown(var.aval.ndim))
    for eqn in graph.eqns:
        for var in eqn.outputs:
            specs[var] = fixed.get(var, unknown(var.aval.ndim))

    def read(atom) -> Dims:
        return whole(atom.aval.ndim) if isinstance(atom, Literal) else specs[atom]

    def offer(atom, proposal: Dims) -> bool:
        if isinstance(atom, Literal) or atom in fixed:
            return False
        merged = _merge(specs[atom], proposal)
        if merged == specs[atom]:
            return False
        specs[atom] = merged
        return True

    def visit(eqn: Eqn) -> bool:
        decision = decide(eqn, [read(a) for a in eqn.inputs],
                          [specs[v] for v in eqn.outputs], mesh)
        if decision is None:
            return False
        changed = False
        for var, proposal in zip(eqn.outputs, decision.outputs):
            changed |= offer(var, proposal)
        for atom, proposal in zip(eqn.inputs, decision.inputs):
            changed |= offer(atom, proposal)
        return changed

    changed = True
    while changed:
        changed = False
        for eqn in graph.eqns:
            changed |= visit(eqn)
        for eqn in reversed(graph.eqns):
            changed |= visit(eqn)
    return {var: settled(dims) for var, dims in specs.items()}


def _merge(current: Dims, proposal: Dims) -> Dims:
    """``current`` with the proposed splits of its unknown dimensions, each taken only
    if its mesh axes split no other dimension yet."""
    used = {a for axes in current if axes for a in axes}
    merged = list(current)
    for d, axes in enumerate(proposal):
        if merged[d] is None and axes and not used & set(axes):
            merged[d] = axes
            used |= set(axes)
    return tuple(merged)
