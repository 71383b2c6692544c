"""Helpers every graph pass shares: building typed equations, substituting variables,
applying a pass to the graphs nested in params (control-flow bodies), and expanding an
equation into the simpler ones a function of its inputs traces to.

Passes never mutate their input: they build new equations and graphs, sharing the
``Var`` objects that do not change.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ember.core.primitive import Primitive
from ember.core.source_info import SourceInfo
from ember.core.staging import trace_to_graph
from ember.ir.graph import Atom, Eqn, Graph, Var, map_subgraphs, substitute

GraphPass = Callable[[Graph], Graph]


def new_eqn(prim: Primitive, inputs: Sequence[Atom], params: Mapping[str, Any],
            source: SourceInfo | None = None) -> Eqn:
    """An equation with fresh output variables typed by the primitive's abstract eval."""
    avals = prim.abstract_eval(*(atom.aval for atom in inputs), **params)
    avals = avals if prim.multiple_results else [avals]
    return Eqn(prim, list(inputs), [Var(aval) for aval in avals], dict(params), source)


def substitute_inputs(eqn: Eqn, env: Mapping[Var, Atom]) -> Eqn:
    if not env:
        return eqn
    return eqn.replace(inputs=[substitute(atom, env) for atom in eqn.inputs])


def substitute_outputs(graph: Graph, eqns: list[Eqn], env: Mapping[Var, Atom]) -> Graph:
    """``graph`` with new equations, its outputs read through ``env``."""
    return graph.replace(eqns=eqns, outputs=[substitute(atom, env) for atom in graph.outputs])


def in_subgraphs(eqn: Eqn, fn: GraphPass) -> Eqn:
    """``eqn`` with ``fn`` applied to its nested graphs."""
    params = map_subgraphs(eqn.params, fn)
    return eqn if params is eqn.params else eqn.replace(params=params)


# A function of an equation's inputs (tracers) returning the list of its outputs.
Expansion = Callable[..., Sequence[Any]]


def expand_equations(graph: Graph, expansion_of: Callable[[Eqn], Expansion | None]) -> Graph:
    """``graph`` with every equation (also in nested graphs) for which ``expansion_of``
    gives a function replaced by the equations that function traces to (built from
    primitives the backend handles), each keeping the source line of the equation."""
    env: dict[Var, Atom] = {}
    eqns: list[Eqn] = []

    def nested(inner: Graph) -> Graph:
        return expand_equations(inner, expansion_of)

    for eqn in graph.eqns:
        eqn = in_subgraphs(substitute_inputs(eqn, env), nested)
        expansion = expansion_of(eqn)
        if expansion is None:
            eqns.append(eqn)
            continue
        body, results = _traced(eqn, expansion)
        eqns.extend(body)
        env.update(zip(eqn.outputs, results))
    return substitute_outputs(graph, eqns, env)


def _traced(eqn: Eqn, expansion: Expansion) -> tuple[list[Eqn], list[Atom]]:
    """The equations of ``expansion`` traced on ``eqn``'s inputs, and its results."""
    body = trace_to_graph(expansion, [atom.aval for atom in eqn.inputs])
    if body.constvars:  # an expansion builds its constants from literals
        raise ValueError(f"the expansion of {eqn.prim.name} captured array constants")
    env: dict[Var, Atom] = dict(zip(body.inputs, eqn.inputs))
    eqns = []
    for sub in body.eqns:
        outputs = [Var(v.aval) for v in sub.outputs]
        env.update(zip(sub.outputs, outputs))
        eqns.append(sub.replace(inputs=[substitute(a, env) for a in sub.inputs],
                                outputs=outputs, source=eqn.source))
    return eqns, [substitute(atom, env) for atom in body.outputs]
