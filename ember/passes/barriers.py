"""Drop optimization barriers once the passes they guard have run.

``checkpoint`` puts an ``optimization_barrier`` in front of the values it recomputes so
that CSE cannot merge the recomputation back into the forward pass. After the last
graph pass the barrier has done its job; code generators would otherwise have to copy
its operands, keeping the very memory remat is meant to free.
"""
from __future__ import annotations

from ember.ir.graph import Atom, Graph, Var
from ember.passes.rewrite import in_subgraphs, substitute_inputs, substitute_outputs


def drop_barriers(graph: Graph) -> Graph:
    env: dict[Var, Atom] = {}
    eqns = []
    for eqn in graph.eqns:
        eqn = in_subgraphs(substitute_inputs(eqn, env), drop_barriers)
        if eqn.prim.name == "optimization_barrier":
            env.update(zip(eqn.outputs, eqn.inputs))
        else:
            eqns.append(eqn)
    return substitute_outputs(graph, eqns, env)
