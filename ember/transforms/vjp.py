"""Linearization and reverse mode on flat lists: JVP, then partial evaluation, then
transposition of the staged linear Graph."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ember.core.abstract import ShapedArray, aval_of
from ember.ir.graph import Graph
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops.rules import UndefinedPrimal, Zero
from ember.transforms.jvp import has_tangent, jvp_flat
from ember.transforms.partial_eval import trace_partial
from ember.transforms.transpose import backward_pass

__all__ = ["Linearized", "linearize_flat"]


@dataclass
class Linearized:
    """The linear map ``tangents -> tangents_out`` of a function at a point.

    ``graph`` takes the tangents of the inexact inputs (``in_tangent`` marks which) and
    returns the tangents of the outputs whose tangent is not symbolically zero
    (``out_nonzero`` marks which); its constants are the residuals.
    """

    graph: Graph
    in_avals: list[ShapedArray]
    out_avals: list[ShapedArray]
    in_tangent: list[bool]
    out_nonzero: list[bool]

    def jvp(self, tangents: Sequence[Any]) -> list[Any]:
        args = [t for t, keep in zip(tangents, self.in_tangent) if keep]
        outs = iter(eval_graph(self.graph, args, bind_equation))
        return [next(outs) if nonzero else Zero(aval)
                for aval, nonzero in zip(self.out_avals, self.out_nonzero)]

    def transpose(self, cts_out: Sequence[Any]) -> list[Any]:
        """Input cotangents (``Zero`` for inputs without tangent) from output ones."""
        cts = [ct for ct, nonzero in zip(cts_out, self.out_nonzero) if nonzero]
        args = [UndefinedPrimal(v.aval) for v in self.graph.inputs]
        found = iter(backward_pass(self.graph, self.graph.constvals, args, cts))
        return [next(found) if keep else Zero(aval)
                for aval, keep in zip(self.in_avals, self.in_tangent)]


def linearize_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any],
                   ) -> tuple[list[Any], Linearized]:
    """Evaluate ``fun`` at ``primals`` and stage its linearization."""
    in_avals = [aval_of(p) for p in primals]
    in_tangent = [has_tangent(a) for a in in_avals]
    found: dict[str, Any] = {}

    def fun_jvp(*tangent_args: Any) -> list[Any]:
        it = iter(tangent_args)
        tangents = [next(it) if keep else Zero(a) for a, keep in zip(in_avals, in_tangent)]
        primals_out, tangents_out = jvp_flat(fun, primals, tangents)
        nonzero = [not isinstance(t, Zero) for t in tangents_out]
        found.update(n=len(primals_out), nonzero=nonzero,
                     out_avals=[aval_of(p) for p in primals_out])
        return [*primals_out, *(t for t in tangents_out if not isinstance(t, Zero))]

    tangent_avals = [a for a, keep in zip(in_avals, in_tangent) if keep]
    # Primal outputs stay known; tangents are forced unknown, so that even a constant
    # tangent is an output of the linear graph.
    tangents_unknown = lambda count: [i >= found["n"] for i in range(count)]  # noqa: E731
    known, graph, _ = trace_partial(fun_jvp, tangent_avals, instantiate=tangents_unknown)
    return known[:found["n"]], Linearized(graph, in_avals, found["out_avals"], in_tangent,
                                          found["nonzero"])
