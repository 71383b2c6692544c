"""Vectorization: the batching interpreter.

A ``BatchTracer`` holds a value with an extra axis (``batch_dim``) being mapped over, or
``batch_dim=None`` for a value that is the same for every element of the batch. Each
primitive's ``batch`` rule computes the whole batch at once.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.pytree import broadcast_prefix, tree_flatten, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.core.trace import Trace, Tracer, full_lower, new_main
from ember.errors import EmberTypeError, EmberValueError
from ember.ir.graph import Graph
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops.rules import move_batch_axis

__all__ = ["AxisData", "BatchTrace", "BatchTracer", "vmap", "vmap_flat", "batch_graph",
           "rule_axis"]


@dataclass(frozen=True)
class AxisData:
    """What a batch interpreter maps over: the axis size, and for a named axis (vmap's
    ``axis_name``, shard_map's mesh axes) the name collectives refer to. ``check_vma``
    marks shard_map's axes: there the gradient of a value invariant along the axis is
    summed over it (see ``ember.sharding.vma``)."""

    size: int
    name: Any = None
    check_vma: bool = False


class BatchTracer(Tracer):
    __slots__ = ("_trace", "value", "batch_dim")

    def __init__(self, trace: "BatchTrace", value: Any, batch_dim: int | None) -> None:
        self._trace = trace
        self.value = value
        self.batch_dim = batch_dim

    @property
    def aval(self) -> ShapedArray:
        aval = aval_of(self.value)
        if self.batch_dim is None:
            return aval
        shape = aval.shape[:self.batch_dim] + aval.shape[self.batch_dim + 1:]
        return ShapedArray(shape, aval.dtype)

    def full_lower(self) -> Any:
        return full_lower(self.value) if self.batch_dim is None else self

    def creation_site(self) -> str | None:
        return self.value.creation_site() if isinstance(self.value, Tracer) else None


# The axes whose batch rules are running, innermost last: a rule that batches a subgraph
# (cond, scan, while) maps it over the same named axis, so collectives inside still act.
_rule_axes: list[AxisData] = []


def rule_axis(size: int) -> AxisData | None:
    """The axis whose batch rule is running, if it maps ``size`` (else None)."""
    return _rule_axes[-1] if _rule_axes and _rule_axes[-1].size == size else None


class BatchTrace(Trace):
    """``main.global_data`` is the ``AxisData`` of the mapped axis."""

    @property
    def axis_size(self) -> int:
        return self.main.global_data.size

    def pure(self, value: Any) -> BatchTracer:
        return BatchTracer(self, value, None)

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        values = [t.value for t in tracers]
        dims = [t.batch_dim for t in tracers]
        named_rule = getattr(prim, "named_batch_rule", None)
        if named_rule is not None and params["axis_name"] == self.main.global_data.name:
            # A collective over this very axis: an operation across the mapped axis.
            outs, out_dims = named_rule(values, dims, self.axis_size, **params)
            return self._wrap(prim, outs, out_dims)
        if all(d is None for d in dims):
            return self._wrap(prim, prim.bind(*values, **params), None)
        rule = prim.batch_rule
        if rule is None:
            reason = prim.waived.get("batch", "it has no batching rule")
            raise EmberTypeError(f"cannot vmap primitive '{prim.name}': {reason}")
        _rule_axes.append(self.main.global_data)  # for batch_graph in the rule
        try:
            outs, out_dims = rule(values, dims, **params)
        finally:
            _rule_axes.pop()
        return self._wrap(prim, outs, out_dims)

    def _wrap(self, prim: Primitive, outs: Any, dims: Any) -> Any:
        if not prim.multiple_results:
            return BatchTracer(self, outs, dims)
        dims = [None] * len(outs) if dims is None else dims
        return [BatchTracer(self, o, d) for o, d in zip(outs, dims)]


def vmap_flat(fun: Callable[..., Sequence[Any]], axis_size: int, args: Sequence[Any],
              in_dims: Sequence[int | None],
              out_dims: int | Sequence[int | None] | None = None,
              axis_name: Any = None, check_vma: bool = False,
              ) -> tuple[list[Any], list[int | None]]:
    """Map ``fun`` over axis ``in_dims[i]`` of each argument (None: not mapped).

    With ``out_dims`` given (one for all outputs, or one each), outputs are moved there
    (an unbatched output is broadcast; a None entry leaves that output where it is).
    Returns the outputs and their batch axes. Collectives over ``axis_name`` inside
    ``fun`` act across the mapped axis.
    """
    with new_main(BatchTrace, AxisData(axis_size, axis_name, check_vma)) as main:
        trace = BatchTrace(main)
        tracers = [BatchTracer(trace, a, d) if d is not None else a
                   for a, d in zip(args, in_dims)]
        outs = [trace.full_raise(out) for out in fun(*tracers)]
        values, dims = [o.value for o in outs], [o.batch_dim for o in outs]
    if out_dims is None:
        return values, dims
    if isinstance(out_dims, int):
        out_dims = [out_dims] * len(values)
    moved = [v if want is None else move_batch_axis(v, d, want, axis_size)
             for v, d, want in zip(values, dims, out_dims)]
    return moved, [d if want is None else want for d, want in zip(dims, out_dims)]


def batch_graph(graph: Graph, axis_size: int, in_dims: Sequence[int | None],
                out_dim: int | None = 0) -> tuple[Graph, list[int | None]]:
    """The Graph computing ``graph`` over a batch (for primitives that hold subgraphs).

    Inputs keep the shapes implied by ``in_dims``; outputs are batched along ``out_dim``
    (every output, broadcasting unbatched ones), or left where they fall when
    ``out_dim`` is None, in which case the returned dims say where that is.
    """
    in_avals = [v.aval if d is None else _with_axis(v.aval, d, axis_size)
                for v, d in zip(graph.inputs, in_dims)]
    found: list[list[int | None]] = []
    axis = rule_axis(axis_size)
    named = {"axis_name": axis.name, "check_vma": axis.check_vma} if axis else {}

    def batched(*args: Any) -> list[Any]:
        body = lambda *xs: eval_graph(graph, xs, bind_equation)  # noqa: E731
        outs, dims = vmap_flat(body, axis_size, args, in_dims, out_dim, **named)
        found.append(dims)
        return outs

    return trace_to_graph(batched, in_avals), found[0]


def _with_axis(aval: ShapedArray, dim: int, size: int) -> ShapedArray:
    shape = list(aval.shape)
    shape.insert(dim, size)
    return aval.update(shape=tuple(shape))


# --- the public ember.vmap -------------------------------------------------------------

def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0,
         axis_name: Any = None, axis_size: int | None = None) -> Callable:
    """Vectorize ``fun`` over an axis of its arguments (as ``jax.vmap``).

    ``in_axes`` is an int (the mapped axis of every argument), None (not mapped), or a
    tuple with one entry per positional argument, each a prefix of that argument's
    pytree. ``out_axes`` likewise for the output. Keyword arguments are mapped over
    axis 0. ``axis_size`` is required when no argument is mapped. Collectives
    (``ember.lax.psum`` ...) over ``axis_name`` inside ``fun`` act across the batch.
    """
    name = getattr(fun, "__name__", "function")

    @functools.wraps(fun)
    def batched(*args: Any, **kwargs: Any) -> Any:
        axes = _in_axes_per_arg(in_axes, len(args), name)
        leaves, in_tree = tree_flatten((args, kwargs))
        dims = [*_leaf_axes(axes, args), *_leaf_axes([0] * len(kwargs), list(kwargs.values()))]
        dims = [_normalize_axis(d, leaf, i) for i, (d, leaf) in enumerate(zip(dims, leaves))]
        size = _axis_size(leaves, dims, axis_size, in_tree, name)
        store: dict[str, Any] = {}

        def flat(*flat_args: Any) -> list[Any]:
            call_args, call_kwargs = tree_unflatten(in_tree, flat_args)
            out_leaves, store["tree"] = tree_flatten(fun(*call_args, **call_kwargs))
            return out_leaves

        outs, out_dims = vmap_flat(flat, size, leaves, dims, axis_name=axis_name)
        out_tree = store["tree"]
        wanted = _out_axes_per_leaf(out_axes, out_tree, name)
        moved = [_move_out(v, d, w, size, name) for v, d, w in zip(outs, out_dims, wanted)]
        return tree_unflatten(out_tree, moved)

    return batched


def _in_axes_per_arg(in_axes: Any, nargs: int, name: str) -> list[Any]:
    if in_axes is None or isinstance(in_axes, int):
        return [in_axes] * nargs
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple):
        raise EmberValueError(f"vmap in_axes must be an int, None, or a tuple with one entry "
                              f"per positional argument, got {type(in_axes).__name__}")
    if len(in_axes) != nargs:
        raise EmberValueError(f"vmap in_axes has {len(in_axes)} entries, but {name} was "
                              f"called with {nargs} positional arguments; they must match")
    return list(in_axes)


def _is_axis_spec(x: Any) -> bool:
    return x is None or isinstance(x, int)


def _broadcast_prefix(spec: Any, tree: Any, what: str) -> list[Any]:
    """One entry of ``spec`` (a prefix of ``tree``) per leaf of ``tree``."""
    try:
        return broadcast_prefix(spec, tree, is_leaf=_is_axis_spec)
    except ValueError:
        raise EmberValueError(f"vmap {what} specification {spec!r} must be a tree prefix "
                              f"of the value it describes, structured as "
                              f"{tree_flatten(tree)[1]}") from None


def _leaf_axes(axes: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    out = []
    for i, (spec, arg) in enumerate(zip(axes, args)):
        out.extend(_broadcast_prefix(spec, arg, f"in_axes[{i}]"))
    return out


def _normalize_axis(axis: Any, leaf: Any, index: int) -> int | None:
    if axis is None:
        return None
    if not isinstance(axis, int):
        raise EmberValueError(f"vmap axes must be ints or None, got {axis!r}")
    ndim = len(np.shape(leaf))
    if not -ndim <= axis < ndim:
        raise EmberValueError(f"vmap in_axes {axis} is out of range for input {index} of "
                              f"shape {tuple(np.shape(leaf))} ({ndim} dimensions)")
    return axis % ndim


def _axis_size(leaves: list, dims: list, axis_size: int | None, in_tree: Any,
               name: str) -> int:
    sizes = [(i, np.shape(leaf)[d], d) for i, (leaf, d) in enumerate(zip(leaves, dims))
             if d is not None]
    if axis_size is not None:
        sizes.append((None, axis_size, None))
    if not sizes:
        raise EmberValueError(f"vmap of {name}: no argument is mapped (all in_axes are None) "
                              "and no axis_size was given")
    if len({s for _, s, _ in sizes}) > 1:
        lines = [f"  input {i} of shape {tuple(np.shape(leaves[i]))} has size {s} "
                 f"along axis {d}" if i is not None else f"  axis_size is {s}"
                 for i, s, d in sizes]
        raise EmberValueError(f"vmap of {name} got inconsistent sizes for the mapped axis "
                              "(inputs numbered as the flattened arguments):\n"
                              + "\n".join(lines))
    return sizes[0][1]


def _out_axes_per_leaf(out_axes: Any, out_tree: Any, name: str) -> list[Any]:
    if out_axes is None or isinstance(out_axes, int):
        return [out_axes] * out_tree.num_leaves
    dummy = tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    return _broadcast_prefix(out_axes, dummy, "out_axes")


def _move_out(value: Any, dim: int | None, want: int | None, size: int, name: str) -> Any:
    if want is None:
        if dim is not None:
            raise EmberValueError(f"vmap of {name}: out_axes is None for an output that "
                                  f"depends on the mapped inputs (shape "
                                  f"{tuple(np.shape(value))}, mapped along axis {dim})")
        return value
    ndim = len(np.shape(value)) + (1 if dim is None else 0)
    if not -ndim <= want < ndim:
        raise EmberValueError(f"vmap out_axes {want} is out of range for an output with "
                              f"{ndim} dimensions")
    return move_batch_axis(value, dim, want % ndim, size)
