"""Partial evaluation: run what is known now, stage what is unknown into a Graph.

Reverse-mode autodiff is JVP followed by partial evaluation (primals are known, tangents
unknown: the known primal computation runs, the linear tangent computation is staged)
followed by transposition of the staged linear Graph (``ember.transforms.transpose``).

A ``PETracer`` is either *known* (it holds a value of a lower interpreter) or *unknown*
(it holds an abstract value and a recipe saying how it is computed: a graph input, a
known value turned into a graph constant -- a *residual* -- or an equation).

Hook for primitives that hold subgraphs (cond, scan, while_loop, checkpoint)
---------------------------------------------------------------------------
By default an equation with any unknown input is staged whole, its known inputs becoming
residuals. A primitive whose known part should run now instead (a ``cond`` with a known
predicate, the loop-invariant part of a ``scan``) registers a rule::

    partial_eval_rules[prim] = rule
    rule(trace: PartialEvalTrace, tracers: list[PETracer], **params) -> output(s)

``tracer.is_known``, ``tracer.value`` (for known ones) and ``tracer.aval`` describe the
operands. The rule computes the known part by binding primitives on known values (they
go to the interpreters below), and stages the unknown part with
``trace.stage(prim, tracers, params)`` (which returns unknown tracers); values computed
by the known part that the staged equation reads (residuals) are passed to it boxed as
``trace.pure(value)``. Known outputs may be returned as plain values. ``partial_eval_graph`` splits a Graph into its known
and unknown parts (using these rules for nested primitives), which is what a rule
usually needs to do to its body. The unknown equation must then have a ``transpose``
rule (its residual operands arrive as values, its linear operands as
``UndefinedPrimal``); ``ember.transforms.transpose.backward_pass`` transposes a body.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.source_info import SourceInfo, user_frame
from ember.core.staging import trace_to_graph
from ember.core.trace import Trace, Tracer, full_lower, new_main
from ember.ir.graph import Eqn, Graph, Var
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops.transformations import partial_eval_rules

__all__ = ["PartialEvalTrace", "PETracer", "partial_eval_rules", "trace_partial",
           "trace_partial_graph", "partial_eval_graph", "Saveable"]

# policy(prim, *avals, **params) -> True when the equation's outputs may be kept as
# residuals (False: recompute them in the unknown graph). See ember.ad_checkpoint.
Saveable = Callable[..., bool]

# Which outputs to force unknown: one flag for all, one per output, or a function of the
# number of outputs (for callers that learn it only while tracing).
Instantiate = bool | Sequence[bool] | Callable[[int], Sequence[bool]]

_order = itertools.count()


class InputRecipe:
    """An unknown input of the traced function."""


class ConstRecipe:
    """A known value used by unknown computation: becomes a residual constant."""

    def __init__(self, value: Any) -> None:
        self.value = value


class EqnRecipe:
    """An equation applied to tracers; ``order`` preserves creation (topological) order."""

    def __init__(self, prim: Primitive, inputs: list["PETracer"], params: dict,
                 outputs: list[Var], source: SourceInfo | None) -> None:
        self.prim, self.inputs, self.params = prim, inputs, params
        self.outputs, self.source = outputs, source
        self.order = next(_order)


class Recompute:
    """How a known value can be recomputed from other tracers (under a remat policy)."""

    def __init__(self, prim: Primitive, inputs: list["PETracer"], params: dict, index: int,
                 shared: dict, source: SourceInfo | None) -> None:
        self.prim, self.inputs, self.params, self.index = prim, inputs, params, index
        self.shared = shared  # one per equation: its staged outputs, once staged
        self.source = source


class PETracer(Tracer):
    __slots__ = ("_trace", "_aval", "value", "recipe", "var", "_staged")

    def __init__(self, trace: "PartialEvalTrace", aval: ShapedArray, *, value: Any = None,
                 recipe: Any = None, var: Var | None = None) -> None:
        self._trace = trace
        self._aval = aval
        self.value = value        # known value (recipe is None or a Recompute)
        self.recipe = recipe
        self.var = var            # set for unknown tracers
        self._staged: PETracer | None = None  # a known tracer's unknown twin, once made

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    @property
    def is_known(self) -> bool:
        return self.var is None

    def full_lower(self) -> Any:
        if self.is_known and self.recipe is None:
            return full_lower(self.value)
        return self

    def concrete_value(self) -> Any:
        if self.is_known:
            value = self.value
            return value.concrete_value() if isinstance(value, Tracer) else value
        return super().concrete_value()


class _State:
    """Shared by the traces of one partial evaluation (``main.global_data``)."""

    def __init__(self, saveable: Saveable | None) -> None:
        self.saveable = saveable  # the remat policy; None: every known value is saveable
        self.residuals: dict[int, tuple[Any, PETracer]] = {}  # by id of the known value


class PartialEvalTrace(Trace):
    @property
    def saveable(self) -> Saveable | None:
        return self.main.global_data.saveable

    def pure(self, value: Any) -> PETracer:
        return PETracer(self, aval_of(value), value=value)

    lift = pure

    def new_input(self, aval: ShapedArray) -> PETracer:
        return PETracer(self, aval, recipe=InputRecipe(), var=Var(aval))

    def instantiate(self, tracer: PETracer) -> PETracer:
        """The unknown version of ``tracer``: a residual, or recomputation under remat."""
        if not tracer.is_known:
            return tracer
        if tracer._staged is None:
            recipe = tracer.recipe
            if isinstance(recipe, Recompute):
                tracer._staged = self._recompute(recipe)
            else:
                tracer._staged = self._residual(tracer.value)
        return tracer._staged

    def _residual(self, value: Any) -> PETracer:
        """One residual per known value, however many tracers box it."""
        residuals = self.main.global_data.residuals
        if id(value) not in residuals:
            aval = aval_of(value)
            residuals[id(value)] = (value, PETracer(self, aval, recipe=ConstRecipe(value),
                                                    var=Var(aval)))
        return residuals[id(value)][1]

    def _recompute(self, recipe: Recompute) -> PETracer:
        if "outs" not in recipe.shared:
            recipe.shared["outs"] = self._stage_eqn(recipe.prim, recipe.inputs, recipe.params,
                                                    recipe.source)
        return recipe.shared["outs"][recipe.index]

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        if all(t.is_known for t in tracers):
            return self._process_known(prim, tracers, params)
        rule = partial_eval_rules.get(prim)
        if rule is not None:
            return rule(self, tracers, **params)
        return self.stage(prim, tracers, params)

    def _process_known(self, prim: Primitive, tracers: list, params: dict) -> Any:
        """Apply ``prim`` to known tracers now; under a remat policy, outputs that are
        not saveable remember how to recompute them."""
        outs = prim.bind(*[t.value for t in tracers], **params)
        policy = self.saveable
        if policy is None or policy(prim, *[t.aval for t in tracers], **params):
            return outs  # saveable: unknown computation reads it as a residual
        flat = outs if prim.multiple_results else [outs]
        shared: dict = {}
        source = user_frame(2)
        known = [PETracer(self, aval_of(v), value=v,
                          recipe=Recompute(prim, list(tracers), params, i, shared, source))
                 for i, v in enumerate(flat)]
        return known if prim.multiple_results else known[0]

    def stage(self, prim: Primitive, tracers: list, params: dict) -> Any:
        """Stage ``prim`` applied to ``tracers`` (known ones become residuals)."""
        outs = self._stage_eqn(prim, tracers, params, user_frame(2))
        return outs if prim.multiple_results else outs[0]

    def _stage_eqn(self, prim: Primitive, tracers: list, params: dict,
                   source: SourceInfo | None) -> list[PETracer]:
        inputs = [self.instantiate(t) for t in tracers]
        out_avals = prim.abstract_eval(*[t.aval for t in inputs], **params)
        out_avals = out_avals if prim.multiple_results else [out_avals]
        out_vars = [Var(aval) for aval in out_avals]
        recipe = EqnRecipe(prim, inputs, dict(params), out_vars, source)
        return [PETracer(self, var.aval, recipe=recipe, var=var) for var in out_vars]


def trace_partial(fun: Callable[..., Sequence[Any]], unknown_avals: Sequence[ShapedArray],
                  instantiate: Instantiate = False,
                  saveable: Saveable | None = None) -> tuple[list[Any], Graph, list[bool]]:
    """Partially evaluate ``fun`` whose arguments are all unknown (known values are
    closed over). Returns ``(known_outs, graph, out_unknowns)``: ``known_outs[i]`` is the
    value of output ``i`` if known (else None); ``graph`` maps the unknown inputs to the
    unknown outputs and holds the residuals as its constants. ``instantiate`` forces
    outputs to be unknown (known values then become residual outputs)."""
    with new_main(PartialEvalTrace, _State(saveable)) as main:
        trace = PartialEvalTrace(main)
        ins = [trace.new_input(aval) for aval in unknown_avals]
        outs = [trace.full_raise(out) for out in fun(*ins)]
        force = _broadcast_flags(instantiate, len(outs))
        outs = [trace.instantiate(o) if f else o for o, f in zip(outs, force)]
        out_unknowns = [not o.is_known for o in outs]
        known = [full_lower(o.value) if o.is_known else None for o in outs]
        graph = _tracers_to_graph(ins, [o for o in outs if not o.is_known])
        return known, graph, out_unknowns


def trace_partial_graph(graph: Graph, known_values: Sequence[Any | None],
                        unknown: Sequence[bool], saveable: Saveable | None = None,
                        ) -> tuple[list[Any], Graph, list[bool]]:
    """``trace_partial`` of evaluating ``graph`` (no constants) on ``known_values``
    (entries for unknown inputs are ignored), with at least one input unknown.

    Every known equation goes through the ``saveable`` policy, even one that reads no
    traced value (a constant broadcast), so a remat policy sees all of them.
    """
    def fun(*unknown_args: PETracer) -> list[Any]:
        trace: PartialEvalTrace = unknown_args[0]._trace

        def apply(prim: Primitive, values: list, params: dict) -> Any:
            if any(isinstance(v, PETracer) and not v.is_known for v in values):
                return prim.bind(*values, **params)
            known = [v if isinstance(v, PETracer) else trace.pure(v) for v in values]
            return trace._process_known(prim, known, params)

        it = iter(unknown_args)
        args = [next(it) if u else v for v, u in zip(known_values, unknown)]
        return eval_graph(graph, args, apply)

    avals = [v.aval for v, u in zip(graph.inputs, unknown) if u]
    return trace_partial(fun, avals, saveable=saveable)


def _broadcast_flags(flags: Instantiate, n: int) -> list[bool]:
    if isinstance(flags, bool):
        return [flags] * n
    return list(flags(n) if callable(flags) else flags)


def _tracers_to_graph(ins: list[PETracer], outs: list[PETracer]) -> Graph:
    """Collect the equations the unknown outputs depend on, in creation order."""
    recipes: dict[int, EqnRecipe] = {}
    consts: dict[int, tuple[Var, Any]] = {}  # by identity of the const tracer
    stack = list(outs)
    seen: set[int] = set()
    while stack:
        tracer = stack.pop()
        if id(tracer) in seen:
            continue
        seen.add(id(tracer))
        recipe = tracer.recipe
        if isinstance(recipe, EqnRecipe):
            if recipe.order not in recipes:
                recipes[recipe.order] = recipe
                stack.extend(recipe.inputs)
        elif isinstance(recipe, ConstRecipe):
            consts[id(tracer)] = (tracer.var, recipe.value)
    eqns = [Eqn(r.prim, [t.var for t in r.inputs], r.outputs, r.params, r.source)
            for _, r in sorted(recipes.items())]
    return Graph(inputs=[t.var for t in ins], outputs=[t.var for t in outs], eqns=eqns,
                 constvars=[var for var, _ in consts.values()],
                 constvals=[value for _, value in consts.values()])


def partial_eval_graph(graph: Graph, in_unknowns: Sequence[bool],
                       instantiate: bool | Sequence[bool] = False,
                       saveable: Saveable | None = None,
                       ) -> tuple[Graph, Graph, list[bool], int]:
    """Split ``graph`` (without constants) by which inputs are unknown.

    Returns ``(known, unknown, out_unknowns, num_residuals)``: ``known`` maps the known
    inputs to the known outputs followed by the residuals; ``unknown`` maps the
    residuals followed by the unknown inputs to the unknown outputs.
    """
    known_avals = [v.aval for v, u in zip(graph.inputs, in_unknowns) if not u]
    unknown_avals = [v.aval for v, u in zip(graph.inputs, in_unknowns) if u]
    found: dict[str, Any] = {}

    def known_fun(*known_args: Any) -> list[Any]:
        def fun(*unknown_args: Any) -> list[Any]:
            known_it, unknown_it = iter(known_args), iter(unknown_args)
            args = [next(unknown_it) if u else next(known_it) for u in in_unknowns]
            return eval_graph(graph, args, bind_equation)

        known, staged, out_unknowns = trace_partial(fun, unknown_avals, instantiate, saveable)
        found.update(staged=staged, out_unknowns=out_unknowns)
        return [k for k, u in zip(known, out_unknowns) if not u] + list(staged.constvals)

    known_graph = trace_to_graph(known_fun, known_avals)
    staged: Graph = found["staged"]
    unknown_graph = staged.replace(inputs=[*staged.constvars, *staged.inputs],
                                   constvars=[], constvals=[])
    return known_graph, unknown_graph, found["out_unknowns"], len(staged.constvars)
