"""Dead code elimination: drop equations whose results nothing reads.

Every primitive is pure (random bits too: keys are explicit), so an equation none of
whose outputs is used can go. Unused constants go too. Nested graphs are cleaned
inside; their signature stays (a body's outputs are what its primitive returns). A
primitive whose unused outputs can be removed (a loop's dead carries) registers a rule
in ``OUTPUT_PRUNING``: ``rule(eqn, used) -> eqn`` returns an equation producing only
the outputs where ``used`` is True, in order, keeping their ``Var`` objects.
"""
from __future__ import annotations

from typing import Callable

from ember.ir.graph import Eqn, Graph, Var
from ember.passes.rewrite import in_subgraphs

OUTPUT_PRUNING: dict[str, Callable[[Eqn, list[bool]], Eqn]] = {}


def dce(graph: Graph) -> Graph:
    """``graph`` without the equations and constants its outputs do not depend on."""
    live = {atom for atom in graph.outputs if isinstance(atom, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(graph.eqns):
        used = [var in live for var in eqn.outputs]
        if not any(used):
            continue
        eqn = _prune_outputs(eqn, used)
        eqn = in_subgraphs(eqn, dce)
        live.update(atom for atom in eqn.inputs if isinstance(atom, Var))
        kept.append(eqn)
    keep = [i for i, var in enumerate(graph.constvars) if var in live]
    return graph.replace(eqns=kept[::-1], constvars=[graph.constvars[i] for i in keep],
                         constvals=[graph.constvals[i] for i in keep] if graph.constvals else [])


def _prune_outputs(eqn: Eqn, used: list[bool]) -> Eqn:
    rule = OUTPUT_PRUNING.get(eqn.prim.name)
    if rule is None or all(used):
        return eqn
    return rule(eqn, used)
