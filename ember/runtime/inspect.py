"""``ember.make_graph``: show the Graph a function traces to (as ``jax.make_jaxpr``)."""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember.core.pytree import tree_flatten, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.ir.graph import Graph
from ember.runtime.jit import _leaf_aval


def make_graph(fun: Callable, static_argnums=()) -> Callable[..., Graph]:
    """``make_graph(f)(*args)`` returns the traced Graph; print it to read it."""
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def trace(*args: Any, **kwargs: Any) -> Graph:
        dynamic = [a for i, a in enumerate(args) if i not in static]
        leaves, treedef = tree_flatten((dynamic, kwargs))

        def flat_fun(*flat):
            dyn, kw = tree_unflatten(treedef, flat)
            it = iter(dyn)
            call_args = [args[i] if i in static else next(it) for i in range(len(args))]
            return tree_flatten(fun(*call_args, **kw))[0]

        return trace_to_graph(flat_fun, [_leaf_aval(leaf) for leaf in leaves])

    return trace
