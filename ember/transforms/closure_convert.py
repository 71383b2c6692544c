"""``closure_convert``: a function's closed-over traced values made explicit arguments
(as ``jax.closure_convert``), so that a custom derivative rule can differentiate with
respect to them (``lax.custom_root``, ``lax.custom_linear_solve``)."""
from __future__ import annotations

from typing import Any, Callable

from ember.core import dtypes
from ember.core.abstract import aval_of
from ember.core.pytree import tree_flatten, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.core.trace import Tracer
from ember.ir.interpreter import bind_equation, eval_graph

__all__ = ["closure_convert"]


def closure_convert(fun: Callable, *example_args: Any) -> tuple[Callable, list[Any]]:
    """``(converted, consts)`` with ``converted(*args, *consts) == fun(*args)`` for
    arguments shaped as ``example_args``: ``consts`` are the traced floating-point values
    ``fun`` closes over (those a transformation may differentiate); other captured values
    stay inside ``converted``."""
    leaves, in_tree = tree_flatten(example_args)
    store: dict[str, Any] = {}

    def flat_fun(*flat: Any) -> list[Any]:
        out_leaves, store["out_tree"] = tree_flatten(fun(*tree_unflatten(in_tree, list(flat))))
        return out_leaves

    graph = trace_to_graph(flat_fun, [aval_of(x) for x in leaves])
    lifted = [isinstance(v, Tracer) and dtypes.is_inexact(aval_of(v).dtype)
              for v in graph.constvals]
    consts = [v for v, up in zip(graph.constvals, lifted) if up]
    kept = [(var, v) for var, v, up in zip(graph.constvars, graph.constvals, lifted) if not up]
    lifted_vars = [var for var, up in zip(graph.constvars, lifted) if up]
    converted_graph = graph.replace(inputs=[*graph.inputs, *lifted_vars],
                                    constvars=[var for var, _ in kept],
                                    constvals=[v for _, v in kept])
    n_consts = len(consts)

    def converted(*args: Any) -> Any:
        split = len(args) - n_consts
        flat, tree = tree_flatten(args[:split])
        if tree != in_tree:
            raise TypeError(f"the closure-converted {getattr(fun, '__name__', 'function')} "
                            f"takes arguments structured as {in_tree}, then its "
                            f"{n_consts} constants; got {tree}")
        outs = eval_graph(converted_graph, [*flat, *args[split:]], bind_equation)
        return tree_unflatten(store["out_tree"], outs)

    return converted, consts
