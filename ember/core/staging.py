"""Staging: trace a Python function with abstract values into a Graph.

The ``GraphTrace`` records every primitive applied while it is the dynamic main. Values
from outside (closed-over arrays, tracers of enclosing transformations) become graph
constants; scalars become literals.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.source_info import SourceInfo, user_frame
from ember.core.trace import Trace, Tracer, new_dynamic_main
from ember.errors import EmberError, annotate
from ember.ir.graph import Eqn, Graph, Literal, Var


class GraphTracer(Tracer):
    __slots__ = ("_trace", "_aval", "atom", "source")

    def __init__(self, trace: "GraphTrace", atom: Var | Literal, source: SourceInfo | None):
        self._trace = trace
        self._aval = atom.aval
        self.atom = atom
        self.source = source

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def creation_site(self) -> str | None:
        return str(self.source) if self.source else None


class GraphBuilder:
    def __init__(self) -> None:
        self.eqns: list[Eqn] = []
        self.constvars: list[Var] = []
        self.constvals: list[Any] = []
        self._const_by_id: dict[int, GraphTracer] = {}

    def const_tracer(self, trace: "GraphTrace", value: Any) -> GraphTracer:
        known = self._const_by_id.get(id(value))
        if known is not None:
            return known
        var = Var(aval_of(value))
        self.constvars.append(var)
        self.constvals.append(value)
        tracer = GraphTracer(trace, var, None)
        self._const_by_id[id(value)] = tracer
        return tracer


def _is_literal_candidate(value: Any) -> bool:
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0


class GraphTrace(Trace):
    @property
    def builder(self) -> GraphBuilder:
        return self.main.global_data

    def pure(self, value: Any) -> GraphTracer:
        if _is_literal_candidate(value):
            aval = aval_of(value)
            return GraphTracer(self, Literal(np.asarray(value), aval), None)
        return self.builder.const_tracer(self, value)

    def lift(self, tracer: Tracer) -> GraphTracer:
        # A tracer of an enclosing transformation becomes an operand of this graph.
        return self.builder.const_tracer(self, tracer)

    def new_arg(self, aval: ShapedArray) -> GraphTracer:
        return GraphTracer(self, Var(aval), None)

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        source = user_frame(2)
        avals = [t.aval for t in tracers]
        try:
            out_avals = prim.abstract_eval(*avals, **params)
        except EmberError as error:
            raise annotate(error, source) from None
        outs_avals = out_avals if prim.multiple_results else [out_avals]
        out_vars = [Var(aval) for aval in outs_avals]
        self.builder.eqns.append(
            Eqn(prim, [t.atom for t in tracers], out_vars, dict(params), source))
        outs = [GraphTracer(self, var, source) for var in out_vars]
        return outs if prim.multiple_results else outs[0]


def trace_to_graph(fun: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray]) -> Graph:
    """Stage ``fun`` (taking and returning flat lists of arrays) into a Graph.

    Captured values end up in ``graph.constvars`` / ``graph.constvals``.
    """
    with new_dynamic_main(GraphTrace, GraphBuilder()) as main:
        trace = GraphTrace(main)
        args = [trace.new_arg(aval) for aval in in_avals]
        outs = fun(*args)
        out_tracers = [trace.full_raise(out) for out in outs]
        builder: GraphBuilder = main.global_data
        return Graph(
            inputs=[t.atom for t in args],
            outputs=[t.atom for t in out_tracers],
            eqns=builder.eqns,
            constvars=builder.constvars,
            constvals=builder.constvals,
        )


def hoist_consts(graph: Graph) -> tuple[Graph, list[Any]]:
    """Turn a graph's constants into leading inputs; returns (graph, constant values).

    Control-flow primitives use this so their bodies are closed: captured values are
    passed as explicit operands.
    """
    closed = graph.replace(inputs=[*graph.constvars, *graph.inputs], constvars=[], constvals=[])
    return closed, list(graph.constvals)
