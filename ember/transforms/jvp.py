"""Forward-mode differentiation: the JVP interpreter.

A ``JVPTracer`` carries a primal value and its tangent; the tangent may be a symbolic
``Zero`` (see ``ember.ops.rules``), so work on values that do not depend on the
differentiated inputs costs nothing. Each primitive's ``jvp`` rule says how tangents
flow through it. ``stop_gradient`` is the primitive whose tangent is always zero.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.pytree import tree_map
from ember.core.trace import Trace, Tracer, full_lower, new_main
from ember.errors import EmberTypeError
from ember.ops.rules import Zero, defjvp_zero, float0, instantiate
from ember.ops.sharding_rules import elementwise_sharding

__all__ = ["JVPTrace", "JVPTracer", "jvp_flat", "stop_gradient", "stop_gradient_p",
           "not_differentiable"]


class JVPTracer(Tracer):
    __slots__ = ("_trace", "primal", "tangent")

    def __init__(self, trace: "JVPTrace", primal: Any, tangent: Any) -> None:
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self) -> ShapedArray:
        return aval_of(self.primal)

    def full_lower(self) -> Any:
        if isinstance(self.tangent, Zero):
            return full_lower(self.primal)
        return self

    def concrete_value(self) -> Any:
        primal = self.primal
        return primal.concrete_value() if isinstance(primal, Tracer) else primal

    def creation_site(self) -> str | None:
        return self.primal.creation_site() if isinstance(self.primal, Tracer) else None


def has_tangent(aval: ShapedArray) -> bool:
    """Only inexact (float, complex) values have nonzero tangents."""
    return dtypes.is_inexact(aval.dtype)


def not_differentiable(prim: Primitive) -> EmberTypeError:
    reason = prim.waived.get("jvp")
    why = f": {reason}" if reason else " (it has no jvp rule)"
    return EmberTypeError(f"cannot differentiate primitive '{prim.name}'{why}")


class JVPTrace(Trace):
    def pure(self, value: Any) -> JVPTracer:
        return JVPTracer(self, value, Zero(aval_of(value)))

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(isinstance(t, Zero) for t in tangents):
            return self._wrap(prim, prim.bind(*primals, **params), None)
        rule = prim.jvp_rule
        if rule is None:
            raise not_differentiable(prim)
        if not getattr(rule, "accepts_symbolic_zeros", False):
            tangents = [instantiate(t) for t in tangents]
        primal_out, tangent_out = rule(primals, tangents, **params)
        return self._wrap(prim, primal_out, tangent_out)

    def _wrap(self, prim: Primitive, primal_out: Any, tangent_out: Any) -> Any:
        if not prim.multiple_results:
            return JVPTracer(self, primal_out, _clean_tangent(primal_out, tangent_out))
        tangent_out = [None] * len(primal_out) if tangent_out is None else tangent_out
        return [JVPTracer(self, p, _clean_tangent(p, t))
                for p, t in zip(primal_out, tangent_out)]


def _clean_tangent(primal: Any, tangent: Any) -> Any:
    """None or the tangent of an integer value becomes a symbolic Zero."""
    aval = aval_of(primal)
    if tangent is None or not has_tangent(aval):
        return Zero(aval)
    return tangent


def jvp_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any],
             tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Push ``tangents`` forward through ``fun`` (flat lists in, flat list out).

    Tangents may be ``Zero``; returned tangents may be ``Zero`` too (callers decide
    whether to instantiate them).
    """
    with new_main(JVPTrace) as main:
        trace = JVPTrace(main)
        tracers = [JVPTracer(trace, p, t if has_tangent(aval_of(p)) else Zero(aval_of(p)))
                   for p, t in zip(primals, tangents)]
        outs = [trace.full_raise(out) for out in fun(*tracers)]
        return [o.primal for o in outs], [o.tangent for o in outs]


def zero_tangent_value(aval: ShapedArray) -> Any:
    """What users see for a zero tangent: zeros, or a float0 array for integer values."""
    if has_tangent(aval):
        return instantiate(Zero(aval))
    return np.zeros(aval.shape, float0)


# --- stop_gradient ---------------------------------------------------------------------

stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_impl(lambda x: x)
defjvp_zero(stop_gradient_p)
stop_gradient_p.def_batch(lambda values, dims: (stop_gradient_p.bind(values[0]), dims[0]))
stop_gradient_p.waive("transpose", "its tangent is zero, so it never appears in a linear graph")
stop_gradient_p.def_sharding(elementwise_sharding)


def stop_gradient(x: Any) -> Any:
    """``x`` itself, but with zero derivative (applies to every inexact leaf of a pytree)."""
    def stop(leaf: Any) -> Any:
        return stop_gradient_p.bind(leaf) if has_tangent(aval_of(leaf)) else leaf

    return tree_map(stop, x)
