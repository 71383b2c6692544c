"""Call-like primitives: equations that wrap a closed Graph (``params["call"]``).

``custom_jvp_call``, ``custom_vjp_call`` and ``checkpoint`` keep their body as a Graph
so that transformations applied later (a ``scan`` body differentiated after staging)
still see the custom rule or the remat policy. Outside transformations they mean just
"run the body": ``inline_calls`` removes them, for backends that compile flat graphs.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember.core.abstract import ShapedArray
from ember.core.staging import hoist_consts, trace_to_graph
from ember.core.primitive import Primitive
from ember.ir.graph import Atom, Eqn, Graph, Var, map_subgraphs, substitute
from ember.ir.interpreter import as_numpy, eval_graph, reference_apply

__all__ = ["CALL_PRIMITIVES", "IDENTITY_PRIMITIVES", "call_primitive", "stage_call",
           "inline_calls"]

# Primitives whose params["call"] is a closed Graph run on the equation's inputs.
CALL_PRIMITIVES: set[Primitive] = set()
# Primitives that return their inputs unchanged (markers for transformations).
IDENTITY_PRIMITIVES: set[Primitive] = set()


def call_primitive(name: str) -> Primitive:
    """A multiple-results primitive that runs ``params['call']``; rules are added by its
    owner (custom.py, remat.py)."""
    prim = Primitive(name, multiple_results=True)
    CALL_PRIMITIVES.add(prim)
    prim.waive("sharding", "its body is not partitioned yet: computed on whole operands")

    @prim.def_abstract_eval
    def _abstract(*avals: ShapedArray, call: Graph, **params: Any) -> list[ShapedArray]:
        return call.out_avals

    @prim.def_impl
    def _impl(*args: Any, call: Graph, **params: Any) -> list[Any]:
        outs = eval_graph(call, args, reference_apply)
        return [as_numpy(o, a.dtype) for o, a in zip(outs, call.out_avals)]

    return prim


def stage_call(fun: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray],
               ) -> tuple[Graph, list[Any]]:
    """Trace ``fun`` (flat in, flat out) to a closed Graph; returns it and the values it
    captured, which become its leading inputs."""
    return hoist_consts(trace_to_graph(fun, list(in_avals)))


def inline_calls(graph: Graph) -> Graph:
    """``graph`` with every call-like equation replaced by its body and every identity
    marker removed (recursively, including nested graphs' own calls)."""
    rename: dict[Var, Atom] = {}
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        inputs = [substitute(a, rename) for a in eqn.inputs]
        if eqn.prim in IDENTITY_PRIMITIVES:
            rename.update(zip(eqn.outputs, inputs))
        elif eqn.prim in CALL_PRIMITIVES:
            body = inline_calls(eqn.params["call"])
            inner: dict[Var, Atom] = dict(zip(body.inputs, inputs))
            for sub in body.eqns:
                outs = [Var(v.aval, v.hint) for v in sub.outputs]
                inner.update(zip(sub.outputs, outs))
                eqns.append(sub.replace(
                    inputs=[substitute(a, inner) for a in sub.inputs],
                    outputs=outs, source=sub.source or eqn.source))
            rename.update(zip(eqn.outputs, [substitute(a, inner) for a in body.outputs]))
        else:
            eqns.append(eqn.replace(inputs=inputs, params=map_subgraphs(eqn.params, inline_calls)))
    return graph.replace(eqns=eqns, outputs=[substitute(a, rename) for a in graph.outputs])

