"""Look at a function without running it: ``make_graph`` / ``make_jaxpr`` (the Graph it
traces to) and ``eval_shape`` (the shapes and dtypes of its results)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from ember.core.pytree import PyTreeDef, tree_flatten, tree_map, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.errors import EmberValueError
from ember.ir.graph import Graph
from ember.runtime.jit import _leaf_aval
from ember.runtime.shape_dtype import ShapeDtypeStruct


def _trace(fun: Callable, static: tuple[int, ...], args: tuple, kwargs: dict
           ) -> tuple[Graph, PyTreeDef]:
    """The Graph of ``fun(*args, **kwargs)`` (the arguments at ``static`` as they are,
    the others abstract), and the structure of its result."""
    dynamic = [a for i, a in enumerate(args) if i not in static]
    leaves, treedef = tree_flatten((dynamic, kwargs))
    out_tree: list[PyTreeDef] = []

    def flat_fun(*flat):
        dyn, kw = tree_unflatten(treedef, flat)
        it = iter(dyn)
        call_args = [args[i] if i in static else next(it) for i in range(len(args))]
        out_leaves, tree = tree_flatten(fun(*call_args, **kw))
        out_tree.append(tree)
        return out_leaves

    graph = trace_to_graph(flat_fun, [_leaf_aval(leaf) for leaf in leaves])
    return graph, out_tree[0]


def _static_tuple(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    return (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)


def make_graph(fun: Callable, static_argnums: int | Sequence[int] = ()) -> Callable[..., Graph]:
    """``make_graph(f)(*args)`` returns the traced Graph; print it to read it."""
    static = _static_tuple(static_argnums)

    @functools.wraps(fun)
    def trace(*args: Any, **kwargs: Any) -> Graph:
        return _trace(fun, static, args, kwargs)[0]

    return trace


class ClosedJaxpr:
    """What ``make_jaxpr`` returns, named as JAX's: Ember's Graph (``.jaxpr``) with its
    captured constants (``.consts``); ``str()`` is the Graph's text."""

    def __init__(self, graph: Graph) -> None:
        self.jaxpr = graph

    @property
    def consts(self) -> list[Any]:
        return list(self.jaxpr.constvals)

    @property
    def eqns(self) -> list:
        return self.jaxpr.eqns

    @property
    def in_avals(self) -> list:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list:
        return self.jaxpr.out_avals

    def pretty_print(self, source: bool = True) -> str:
        return self.jaxpr.pretty_print(source=source)

    def __str__(self) -> str:
        return str(self.jaxpr)

    def __repr__(self) -> str:
        return str(self.jaxpr)


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               axis_env: Sequence[tuple[Any, int]] | None = None,
               return_shape: bool = False) -> Callable[..., Any]:
    """As ``jax.make_jaxpr``: ``make_jaxpr(f)(*args)`` is the traced program (a
    ``ClosedJaxpr`` whose text is Ember's Graph); with ``return_shape``, also the result's
    ``ShapeDtypeStruct`` pytree."""
    if axis_env:
        raise EmberValueError("make_jaxpr: axis_env is not supported; trace a function that "
                              "binds its axis names itself (ember.vmap(..., axis_name=...))")
    static = _static_tuple(static_argnums)

    @functools.wraps(fun)
    def make(*args: Any, **kwargs: Any) -> Any:
        graph, out_tree = _trace(fun, static, args, kwargs)
        jaxpr = ClosedJaxpr(graph)
        if not return_shape:
            return jaxpr
        return jaxpr, _shapes(graph, out_tree)

    return make


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """The ``ShapeDtypeStruct`` of each result of ``fun(*args, **kwargs)``, found by tracing
    (nothing runs). Arguments may be arrays or ``ShapeDtypeStruct``s."""
    graph, out_tree = _trace(fun, (), args, kwargs)
    return _shapes(graph, out_tree)


def _shapes(graph: Graph, out_tree: PyTreeDef) -> Any:
    return tree_map(ShapeDtypeStruct.of, tree_unflatten(out_tree, graph.out_avals))
