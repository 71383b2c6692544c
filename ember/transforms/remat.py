"""Rematerialization: ``ember.checkpoint`` / ``ember.remat`` (as ``jax.checkpoint``).

A checkpointed function is bound as the call primitive ``checkpoint``. Differentiating
it is ordinary, except in partial evaluation: there its known (forward) part runs now,
but only the values its ``policy`` calls saveable are kept as residuals for the
backward pass; every other value the backward pass needs is recomputed there, from the
saved ones, just before it is used. Less is stored between the passes, more is
computed. The recomputation reads its inputs through ``optimization_barrier`` so that
common-subexpression elimination cannot merge it back into the forward pass.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from ember.core.abstract import aval_of
from ember.core.primitive import Primitive
from ember.core.pytree import tree_flatten, tree_map, tree_unflatten
from ember.core.trace import is_tracing
from ember.ir.graph import Graph
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops import rules
from ember.transforms.calls import IDENTITY_PRIMITIVES, call_primitive, stage_call
from ember.transforms.jvp import has_tangent, jvp_flat
from ember.transforms.partial_eval import (PartialEvalTrace, Saveable, partial_eval_rules,
                                           trace_partial_graph)
from ember.ops.rules import Zero, instantiate, is_undefined_primal
from ember.ops.sharding_rules import elementwise_sharding
from ember.transforms.transpose import backward_pass
from ember.transforms.vmap import batch_graph

__all__ = ["checkpoint", "remat", "checkpoint_name", "checkpoint_p", "name_p",
           "optimization_barrier", "optimization_barrier_p"]


def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Saveable | None = None,
               static_argnums: int | Sequence[int] = ()) -> Callable:
    """``fun``, recomputed in the backward pass instead of storing its intermediates.

    ``policy(prim, *avals, **params) -> bool`` says which intermediate values may be
    saved anyway (see ``ember.ad_checkpoint.checkpoint_policies``); the default saves
    none: only the function's inputs are kept. ``static_argnums`` are arguments passed
    through as Python values (not traced).
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def remat_fun(*args: Any, **kwargs: Any) -> Any:
        if not is_tracing():
            return fun(*args, **kwargs)
        dynamic = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_flatten((dynamic, kwargs))
        store: dict[str, Any] = {}

        def flat(*flat_args: Any) -> list[Any]:
            dyn, kw = tree_unflatten(in_tree, flat_args)
            it = iter(dyn)
            call_args = [args[i] if i in static else next(it) for i in range(len(args))]
            out_leaves, store["tree"] = tree_flatten(fun(*call_args, **kw))
            return out_leaves

        call, consts = stage_call(flat, [aval_of(x) for x in leaves])
        outs = checkpoint_p.bind(*consts, *leaves, call=call, policy=policy,
                                 prevent_cse=prevent_cse)
        return tree_unflatten(store["tree"], outs)

    return remat_fun


remat = checkpoint


# --- the checkpoint primitive -----------------------------------------------------------

checkpoint_p = call_primitive("checkpoint")


def _nothing_saveable(*_: Any, **__: Any) -> bool:
    return False


def _jvp_graph(graph: Graph, nonzero: Sequence[bool]) -> tuple[Graph, list[Any]]:
    """``graph``'s JVP as a closed Graph: primals and the nonzero tangents in; primal
    outputs and the tangents of the inexact outputs out."""
    n = len(graph.inputs)

    def fun(*args: Any) -> list[Any]:
        it = iter(args[n:])
        tangents = [next(it) if nz else Zero(a) for a, nz in zip(graph.in_avals, nonzero)]
        outs, t_outs = jvp_flat(lambda *xs: eval_graph(graph, xs, bind_equation),
                                args[:n], tangents)
        return [*outs, *(instantiate(t) for t, a in zip(t_outs, graph.out_avals)
                         if has_tangent(a))]

    tangent_avals = [a for a, nz in zip(graph.in_avals, nonzero) if nz]
    return stage_call(fun, [*graph.in_avals, *tangent_avals])


def _checkpoint_jvp(primals, tangents, *, call, policy, prevent_cse):
    nonzero = [not isinstance(t, Zero) for t in tangents]
    jvp_call, consts = _jvp_graph(call, nonzero)
    outs = checkpoint_p.bind(*consts, *primals, *(t for t in tangents if not isinstance(t, Zero)),
                             call=jvp_call, policy=policy, prevent_cse=prevent_cse)
    n = len(call.outputs)
    t_iter = iter(outs[n:])
    return outs[:n], [next(t_iter) if has_tangent(a) else None for a in call.out_avals]


checkpoint_p.def_jvp(rules.accepts_symbolic_zeros(_checkpoint_jvp))


def _checkpoint_partial_eval(trace: PartialEvalTrace, tracers: list, *, call: Graph,
                             policy: Saveable | None, prevent_cse: bool) -> list[Any]:
    """Run the known part now, keeping only what ``policy`` saves; stage the rest
    (recomputation included) as one ``checkpoint`` equation."""
    unknown = [not t.is_known for t in tracers]
    known_outs, staged, out_unknowns = trace_partial_graph(
        call, [t.value for t in tracers], unknown, saveable=policy or _nothing_saveable)
    body = staged.replace(inputs=[*staged.constvars, *staged.inputs], constvars=[],
                          constvals=[])
    residuals = [trace.pure(value) for value in staged.constvals]
    staged_outs = iter(trace.stage(checkpoint_p,
                                   [*residuals, *(t for t, u in zip(tracers, unknown) if u)],
                                   dict(call=body, policy=policy, prevent_cse=prevent_cse)))
    return [next(staged_outs) if u else k for k, u in zip(known_outs, out_unknowns)]


partial_eval_rules[checkpoint_p] = _checkpoint_partial_eval


def _checkpoint_transpose(cts, *args, call, policy, prevent_cse):
    defined = [i for i, a in enumerate(args) if not is_undefined_primal(a)]
    args = list(args)
    if prevent_cse and defined:
        shielded = optimization_barrier_p.bind(*(args[i] for i in defined))
        for i, value in zip(defined, shielded):
            args[i] = value
    cts_in = backward_pass(call, [], args, cts)
    return [None if ct is None or isinstance(ct, Zero) else ct for ct in cts_in]


checkpoint_p.def_transpose(_checkpoint_transpose)


def _checkpoint_batch(values, dims, *, call, policy, prevent_cse):
    batched, _ = batch_graph(call, rules.batch_size(values, dims), dims, out_dim=0)
    outs = checkpoint_p.bind(*values, call=batched, policy=policy, prevent_cse=prevent_cse)
    return outs, [0] * len(outs)


checkpoint_p.def_batch(_checkpoint_batch)


# --- checkpoint_name ------------------------------------------------------------------

name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda x, *, name: x)
rules.deflinear(name_p, lambda ct, x, *, name: [ct])
name_p.def_batch(lambda values, dims, *, name: (name_p.bind(values[0], name=name), dims[0]))
name_p.def_sharding(elementwise_sharding)
IDENTITY_PRIMITIVES.add(name_p)


def checkpoint_name(x: Any, name: str) -> Any:
    """``x`` (a pytree), tagged ``name`` for checkpoint policies (``save_only_these_names``)."""
    return tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


# --- optimization_barrier ---------------------------------------------------------------

# Returns its operands unchanged; passes must not look through it (no CSE across it).
optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
optimization_barrier_p.def_impl(lambda *xs: list(xs))


def _barrier_jvp(primals, tangents):
    return optimization_barrier_p.bind(*primals), list(tangents)


optimization_barrier_p.def_jvp(rules.accepts_symbolic_zeros(_barrier_jvp))
optimization_barrier_p.waive("sharding", "computed on whole operands: a barrier is rare in "
                            "partitioned programs")
optimization_barrier_p.def_transpose(lambda cts, *xs: list(cts))
optimization_barrier_p.def_batch(
    lambda values, dims: (optimization_barrier_p.bind(*values), list(dims)))


def optimization_barrier(operands: Any) -> Any:
    """``operands`` (a pytree) unchanged, opaque to common-subexpression elimination."""
    leaves, treedef = tree_flatten(operands)
    return tree_unflatten(treedef, optimization_barrier_p.bind(*leaves))
