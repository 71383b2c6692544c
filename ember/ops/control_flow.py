"""Structured control flow staged into the Graph: cond / switch, while_loop, scan.

Each primitive holds its bodies as closed Graphs in its params; values the user's
functions capture from outside become explicit leading operands ("consts"), so bodies
never close over anything. The Python API (``cond``, ``switch``, ``while_loop``,
``fori_loop``, ``scan``, ``map``) follows ``jax.lax``.

Operand layouts:
  cond     (index, *operands)                   branches: tuple of Graphs, same signature
  while    (*cond_consts, *body_consts, *carry) cond_graph, body_graph, cond_nconsts, body_nconsts
  scan     (*consts, *carry, *xs)               body: (consts, carry, x slices) -> (carry, ys)
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.pytree import tree_flatten, tree_map, tree_unflatten
from ember.config import config
from ember.core.staging import hoist_consts, trace_to_graph
from ember.core.trace import Tracer
from ember.errors import EmberTypeError, EmberValueError
from ember.ir.graph import Graph, Var
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops import transformations
from ember.ops.elementwise import clamp, convert_element_type, lt, ne, select_n
from ember.ops.reductions import reduce_or
from ember.ops.rules import (UndefinedPrimal, batch_size, instantiate, is_undefined_primal,
                             move_batch_axis)
from ember.ops.structural import broadcast_in_dim, concatenate, reshape, slice_in_dim

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


# --- tracing user functions into closed graphs ----------------------------------------

def _trace_closed(fun: Callable, in_avals: Sequence[ShapedArray]) -> tuple[Graph, list[Any]]:
    """Trace ``fun`` (flat in, flat out) into a graph whose captured values are leading inputs."""
    graph = trace_to_graph(fun, list(in_avals))
    return hoist_consts(graph)


def _flat_fun(fun: Callable, in_tree, out_tree_box: list, spread: bool = False) -> Callable:
    """``fun`` on flat leaves; ``spread``: the tree is an argument tuple to unpack."""
    def flat(*args):
        value = tree_unflatten(in_tree, args)
        out = fun(*value) if spread else fun(value)
        leaves, tree = tree_flatten(out)
        out_tree_box.append(tree)
        return leaves

    return flat


def _avals(values: Sequence[Any]) -> list[ShapedArray]:
    return [aval_of(v) for v in values]


def _describe(avals: Sequence[ShapedArray]) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _run(graph: Graph, args: Sequence[Any]) -> list[Any]:
    """Evaluate a body under whatever interpreters are active (re-binding its equations)."""
    return eval_graph(graph, list(args), bind_equation)


# --- cond / switch --------------------------------------------------------------------

cond_p = Primitive("cond", multiple_results=True)


@cond_p.def_abstract_eval
def _cond_abstract(index: ShapedArray, *operands: ShapedArray, branches: tuple[Graph, ...]):
    if index.shape != () or not dtypes.is_integer(index.dtype):
        raise EmberTypeError(f"cond index must be an integer scalar, got {index.str_short()}")
    return branches[0].out_avals


@cond_p.def_impl
def _cond_impl(index, *operands, branches):
    chosen = int(np.clip(np.asarray(index), 0, len(branches) - 1))
    return eval_graph(branches[chosen], list(operands))


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """Apply ``branches[index](*operands)``; ``index`` is clamped into range (as JAX)."""
    if not branches:
        raise EmberValueError("switch needs at least one branch")
    if config.disable_jit and not isinstance(index, Tracer):  # (as JAX: a Python branch)
        return branches[int(np.clip(np.asarray(index), 0, len(branches) - 1))](*operands)

    leaves, in_tree = tree_flatten(operands)
    in_avals = _avals(leaves)
    graphs, consts, out_trees = [], [], []
    for branch in branches:
        box: list = []
        graph, branch_consts = _trace_closed(_flat_fun(branch, in_tree, box, spread=True), in_avals)
        graphs.append(graph)
        consts.append(branch_consts)
        out_trees.append(box[0])
    for i, (graph, tree) in enumerate(zip(graphs, out_trees)):
        if tree != out_trees[0] or graph.out_avals != graphs[0].out_avals:
            raise EmberTypeError(
                f"cond/switch branches must return the same structure, shapes and dtypes: "
                f"branch 0 returns {out_trees[0]} {_describe(graphs[0].out_avals)}, branch {i} "
                f"returns {tree} {_describe(graph.out_avals)}")
    # One signature for all branches: (every branch's consts..., operands...)
    const_avals = [_avals(c) for c in consts]
    unified = []
    for i, graph in enumerate(graphs):
        before = [a for avals in const_avals[:i] for a in avals]
        n_own = len(consts[i])
        own, rest = graph.inputs[:n_own], graph.inputs[n_own:]
        after_consts = [a for avals in const_avals[i + 1:] for a in avals]
        unified.append(graph.replace(inputs=[*(Var(a) for a in before), *own,
                                             *(Var(a) for a in after_consts), *rest]))
    index = convert_element_type(index, dtypes.int32)
    if len(branches) > 1:
        index = clamp(np.int32(0), index, np.int32(len(branches) - 1))
    all_consts = [c for branch_consts in consts for c in branch_consts]
    outs = cond_p.bind(index, *all_consts, *leaves, branches=tuple(unified))
    return tree_unflatten(out_trees[0], outs)


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, staged as one op."""
    pred_aval = aval_of(pred)
    if config.disable_jit and not isinstance(pred, Tracer) and pred_aval.shape == ():
        return (true_fun if bool(np.asarray(pred)) else false_fun)(*operands)
    if pred_aval.shape != ():
        raise EmberTypeError(f"cond predicate must be a scalar, got {pred_aval.str_short()}; "
                             "for elementwise selection use ember.numpy.where")

    if not dtypes.is_bool(pred_aval.dtype):
        pred = ne(pred, np.zeros((), pred_aval.dtype))
    return switch(convert_element_type(pred, dtypes.int32), [false_fun, true_fun], *operands)


# --- while_loop -----------------------------------------------------------------------

while_p = Primitive("while", multiple_results=True)


@while_p.def_abstract_eval
def _while_abstract(*operands, cond_graph, body_graph, cond_nconsts, body_nconsts):
    return body_graph.out_avals


@while_p.def_impl
def _while_impl(*operands, cond_graph, body_graph, cond_nconsts, body_nconsts):
    cond_consts = list(operands[:cond_nconsts])
    body_consts = list(operands[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(operands[cond_nconsts + body_nconsts:])
    while bool(np.asarray(eval_graph(cond_graph, cond_consts + carry)[0])):
        carry = eval_graph(body_graph, body_consts + carry)
    return carry


def _check_carry(what: str, in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray],
                 in_tree, out_tree) -> None:
    if in_tree != out_tree or list(in_avals) != list(out_avals):
        raise EmberTypeError(
            f"{what} must return a carry of the same structure, shapes and dtypes as it "
            f"receives: got {in_tree} {_describe(in_avals)} in, {out_tree} "
            f"{_describe(out_avals)} out")


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``; staged, not unrolled."""
    if config.disable_jit:
        done, val = _python_while(cond_fun, body_fun, init_val)
        if done:
            return val
    leaves, in_tree = tree_flatten(init_val)
    avals = _avals(leaves)
    cond_box: list = []
    cond_graph, cond_consts = _trace_closed(_flat_fun(cond_fun, in_tree, cond_box), avals)
    out = cond_graph.out_avals
    if len(out) != 1 or out[0].shape != () or not dtypes.is_bool(out[0].dtype):
        raise EmberTypeError(f"while_loop cond_fun must return a bool scalar, got "
                             f"{_describe(out)}")
    body_box: list = []
    body_graph, body_consts = _trace_closed(_flat_fun(body_fun, in_tree, body_box), avals)
    _check_carry("while_loop body_fun", avals, body_graph.out_avals, in_tree, body_box[0])
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond_graph=cond_graph,
                        body_graph=body_graph, cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts))
    return tree_unflatten(in_tree, outs)


def _python_while(cond_fun: Callable, body_fun: Callable, val: Any) -> tuple[bool, Any]:
    """Under ``disable_jit``: (True, the loop run in Python) while the condition is
    concrete; (False, None) for a traced one (the loop is staged instead, as in JAX)."""
    while True:
        go = cond_fun(val)
        if isinstance(go, Tracer):
            return False, None
        if not bool(np.asarray(go)):
            return True, val
        val = body_fun(val)


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``.

    With Python-int bounds this is a ``scan`` (so it is reverse-differentiable, as in
    JAX); with traced bounds a ``while_loop``. Under ``disable_jit``, with concrete bounds,
    a Python loop.
    """
    if config.disable_jit and not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        val = init_val
        for i in range(int(np.asarray(lower)), int(np.asarray(upper))):
            val = body_fun(np.int32(i), val)
        return val
    if isinstance(lower, (int, np.integer)) and isinstance(upper, (int, np.integer)):
        lower, upper = int(lower), int(upper)

        def step(carry, _):
            i, val = carry
            return (i + np.int32(1), body_fun(i, val)), None

        (_, result), _ = scan(step, (np.int32(lower), init_val), None,
                              length=max(upper - lower, 0))
        return result

    lower = convert_element_type(lower, dtypes.int32)
    upper = convert_element_type(upper, dtypes.int32)

    def cond_fn(carry):
        return lt(carry[0], carry[1])

    def body_fn(carry):
        i, hi, val = carry
        return i + np.int32(1), hi, body_fun(i, val)

    return while_loop(cond_fn, body_fn, (lower, upper, init_val))[2]


# --- scan -----------------------------------------------------------------------------

scan_p = Primitive("scan", multiple_results=True)


@scan_p.def_abstract_eval
def _scan_abstract(*operands, body, num_consts, num_carry, length, reverse, unroll):
    carry_avals = body.out_avals[:num_carry]
    ys_avals = [ShapedArray((length, *a.shape), a.dtype) for a in body.out_avals[num_carry:]]
    return [*carry_avals, *ys_avals]


@scan_p.def_impl
def _scan_impl(*operands, body, num_consts, num_carry, length, reverse, unroll):
    consts = list(operands[:num_consts])
    carry = list(operands[num_consts:num_consts + num_carry])
    xs = [np.asarray(x) for x in operands[num_consts + num_carry:]]
    ys_avals = body.out_avals[num_carry:]
    ys = [np.empty((length, *a.shape), a.dtype) for a in ys_avals]
    steps = range(length - 1, -1, -1) if reverse else range(length)
    for i in steps:
        outs = eval_graph(body, consts + carry + [x[i] for x in xs])
        carry = outs[:num_carry]
        for y, value in zip(ys, outs[num_carry:]):
            y[i] = value
    return [*carry, *ys]


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int = 1) -> tuple[Any, Any]:
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns (carry, ys).
    Under ``disable_jit``, a Python loop (the ys stacked after it)."""
    x_leaves, x_tree = tree_flatten(xs)
    lengths = {aval_of(x).shape[0] for x in x_leaves if aval_of(x).ndim > 0}
    if any(aval_of(x).ndim == 0 for x in x_leaves):
        raise EmberValueError("scan xs must have a leading axis to scan over; got a scalar")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise EmberValueError(
            f"scan needs one length: xs leading axes and length= give {sorted(lengths)}"
            if lengths else "scan over no xs needs length=")
    n = lengths.pop()
    if config.disable_jit:
        return _python_scan(f, init, x_leaves, x_tree, n, reverse)
    carry_leaves, carry_tree = tree_flatten(init)
    carry_avals = _avals(carry_leaves)
    x_avals = [ShapedArray(aval_of(x).shape[1:], aval_of(x).dtype) for x in x_leaves]
    out_box: list = []

    def flat_body(*args):
        carry = tree_unflatten(carry_tree, args[:len(carry_leaves)])
        x = tree_unflatten(x_tree, args[len(carry_leaves):])
        result = f(carry, x)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise EmberTypeError("scan body must return a pair (new_carry, y)")
        new_carry, y = result
        carry_out, carry_out_tree = tree_flatten(new_carry)
        y_leaves, y_tree = tree_flatten(y)
        out_box.append((carry_out_tree, y_tree))
        return [*carry_out, *y_leaves]

    body, consts = _trace_closed(flat_body, [*carry_avals, *x_avals])
    carry_out_tree, y_tree = out_box[0]
    _check_carry("scan body", carry_avals, body.out_avals[:len(carry_leaves)], carry_tree,
                 carry_out_tree)
    outs = scan_p.bind(*consts, *carry_leaves, *x_leaves, body=body, num_consts=len(consts),
                       num_carry=len(carry_leaves), length=n, reverse=bool(reverse),
                       unroll=int(unroll))
    carry_out = tree_unflatten(carry_tree, outs[:len(carry_leaves)])
    return carry_out, tree_unflatten(y_tree, outs[len(carry_leaves):])


def _python_scan(f: Callable, carry: Any, x_leaves: list[Any], x_tree, length: int,
                 reverse: bool) -> tuple[Any, Any]:
    from ember.ops.structural import concatenate, expand_dims

    ys = []
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        carry, y = f(carry, tree_unflatten(x_tree, [x[i] for x in x_leaves]))
        ys.append(y)
    if not ys:
        raise EmberValueError("scan of length 0 under disable_jit: the shapes of its ys "
                              "are unknown without tracing the body")
    ys = ys[::-1] if reverse else ys
    leaves = [tree_flatten(y)[0] for y in ys]
    stacked = [concatenate([expand_dims(v, (0,)) for v in column], 0)
               for column in zip(*leaves)]
    return carry, tree_unflatten(tree_flatten(ys[0])[1], stacked)


def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:
    """``stack([f(x) for x in xs])`` as a scan (as ``jax.lax.map``). With ``batch_size``,
    each scan step applies ``vmap(f)`` to ``batch_size`` rows, and the rows left over
    (fewer than a batch) go through one more ``vmap(f)``."""
    if batch_size is None:
        _, ys = scan(lambda carry, x: (carry, f(x)), (), xs)
        return ys
    leaves, tree = tree_flatten(xs)
    if not leaves:
        raise EmberValueError("lax.map with batch_size needs at least one array in xs")
    if int(batch_size) < 1:
        raise EmberValueError(f"lax.map: batch_size must be >= 1, got {batch_size}")
    n, size = np.shape(leaves[0])[0], int(batch_size)
    full = n - n % size
    batched = [reshape(slice_in_dim(x, 0, full), (full // size, size, *np.shape(x)[1:]))
               for x in leaves]
    ys = map(transformations.vmap(f), tree_unflatten(tree, batched))
    ys = tree_map(lambda y: reshape(y, (full, *np.shape(y)[2:])), ys)
    if full == n:
        return ys
    rest = transformations.vmap(f)(
        tree_unflatten(tree, [slice_in_dim(x, full, n) for x in leaves]))
    return tree_map(lambda a, b: concatenate([a, b], 0), ys, rest)


# --- transformation rules ---------------------------------------------------------------
# Rules re-enter the Python API above with closures that run the bodies under the
# needed transformation (vmap or jvp of the body), so every rule is a few lines and the
# transformed bodies are traced, hoisted and checked exactly like user bodies.

def _vmapped(graph: Graph, in_axes: Sequence[int | None], size: int) -> Callable:
    axis = transformations.rule_axis(size)  # collectives in the bodies act over its name
    return transformations.vmap(lambda *args: _run(graph, args), in_axes=tuple(in_axes),
                                out_axes=0, axis_name=axis.name if axis else None,
                                axis_size=size)


def _to_front(values: Sequence[Any], dims: Sequence[int | None], size: int,
              force: bool = False) -> list[Any]:
    """Batch axes moved to 0; with ``force`` unbatched values are broadcast too."""
    return [move_batch_axis(v, d, 0, size) if (d is not None or force) else v
            for v, d in zip(values, dims)]


def _cond_batch(values, dims, *, branches):
    size = batch_size(values, dims)
    index, operands = values[0], _to_front(values[1:], dims[1:], size)
    in_axes = [None if d is None else 0 for d in dims[1:]]
    batched = [_vmapped(g, in_axes, size) for g in branches]
    if dims[0] is None:
        outs = switch(index, batched, *operands)
        return outs, [0] * len(outs)
    # A batched predicate: every lane may take another branch, so run all and select.
    index = _to_front([index], [dims[0]], size)[0]
    per_branch = [branch(*operands) for branch in batched]
    outs = []
    for k, aval in enumerate(branches[0].out_avals):
        which = broadcast_in_dim(index, (size, *aval.shape), (0,))
        outs.append(select_n(which, *[outs_b[k] for outs_b in per_branch]))
    return outs, [0] * len(outs)


cond_p.def_batch(_cond_batch)


def _split(values: Sequence[Any], *sizes: int) -> list[list[Any]]:
    parts, start = [], 0
    for size in sizes:
        parts.append(list(values[start:start + size]))
        start += size
    parts.append(list(values[start:]))
    return parts


def _while_batch(values, dims, *, cond_graph, body_graph, cond_nconsts, body_nconsts):
    size = batch_size(values, dims)
    cconsts, bconsts, carry = _split(values, cond_nconsts, body_nconsts)
    cdims, bdims, _ = _split(dims, cond_nconsts, body_nconsts)
    cconsts, bconsts = _to_front(cconsts, cdims, size), _to_front(bconsts, bdims, size)
    carry = _to_front(carry, dims[cond_nconsts + body_nconsts:], size, force=True)
    const_axes = lambda ds: [None if d is None else 0 for d in ds]  # noqa: E731
    lane_pred = _vmapped(cond_graph, const_axes(cdims) + [0] * len(carry), size)
    lane_body = _vmapped(body_graph, const_axes(bdims) + [0] * len(carry), size)

    def any_lane_running(c):
        return reduce_or(lane_pred(*cconsts, *c)[0], (0,))

    def step(c):
        running = lane_pred(*cconsts, *c)[0]
        new = lane_body(*bconsts, *c)
        return [select_n(broadcast_in_dim(running, v.shape, (0,)), old, v)
                for old, v in zip(c, new)]

    outs = while_loop(any_lane_running, step, carry)
    return outs, [0] * len(outs)


while_p.def_batch(_while_batch)


def _scan_batch(values, dims, *, body, num_consts, num_carry, length, reverse, unroll):
    size = batch_size(values, dims)
    consts, carry, xs = _split(values, num_consts, num_carry)
    cdims, _, xdims = _split(dims, num_consts, num_carry)
    consts = _to_front(consts, cdims, size)
    carry = _to_front(carry, dims[num_consts:num_consts + num_carry], size, force=True)
    xs = [x if d is None else move_batch_axis(x, d, 1, size) for x, d in zip(xs, xdims)]
    lane_body = _vmapped(body, [None if d is None else 0 for d in cdims] + [0] * num_carry
                         + [None if d is None else 0 for d in xdims], size)

    def step(c, x):
        outs = lane_body(*consts, *c, *x)
        return outs[:num_carry], outs[num_carry:]

    carry_out, ys = scan(step, carry, xs, length=length, reverse=reverse, unroll=unroll)
    return [*carry_out, *ys], [0] * num_carry + [1] * len(ys)


scan_p.def_batch(_scan_batch)


def _jvp_of(graph: Graph, num_primals: int) -> Callable:
    """A function (primals..., tangents...) -> (primal outs..., tangent outs...)."""
    def run(*args):
        primals_out, tangents_out = transformations.jvp_flat(
            lambda *a: _run(graph, a), args[:num_primals], args[num_primals:])
        return [*primals_out, *(instantiate(t) for t in tangents_out)]

    return run


def _cond_jvp(primals, tangents, *, branches):
    n = len(primals) - 1
    outs = switch(primals[0], [_jvp_of(g, n) for g in branches], *primals[1:], *tangents[1:])
    m = len(branches[0].outputs)
    return outs[:m], outs[m:]


cond_p.def_jvp(_cond_jvp)


def _while_jvp(primals, tangents, *, cond_graph, body_graph, cond_nconsts, body_nconsts):
    cconsts, bconsts, carry = _split(primals, cond_nconsts, body_nconsts)
    _, bconsts_dot, carry_dot = _split(tangents, cond_nconsts, body_nconsts)
    body_jvp = _jvp_of(body_graph, body_nconsts + len(carry))
    n = len(carry)

    def cond_fn(c):
        return _run(cond_graph, [*cconsts, *c[:n]])[0]

    def body_fn(c):
        outs = body_jvp(*bconsts, *c[:n], *bconsts_dot, *c[n:])
        return outs

    outs = while_loop(cond_fn, body_fn, [*carry, *carry_dot])
    return outs[:n], outs[n:]


while_p.def_jvp(_while_jvp)


def _scan_jvp(primals, tangents, *, body, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = _split(primals, num_consts, num_carry)
    consts_dot, carry_dot, xs_dot = _split(tangents, num_consts, num_carry)
    body_jvp = _jvp_of(body, len(primals))
    n_ys = len(body.outputs) - num_carry

    def step(c, x):
        n_x = len(xs)
        outs = body_jvp(*consts, *c[:num_carry], *x[:n_x], *consts_dot, *c[num_carry:],
                        *x[n_x:])
        # outs: primal (carry, ys), tangent (carry, ys)
        p_carry, p_ys = outs[:num_carry], outs[num_carry:num_carry + n_ys]
        t_carry, t_ys = outs[num_carry + n_ys:2 * num_carry + n_ys], outs[2 * num_carry + n_ys:]
        return [*p_carry, *t_carry], [*p_ys, *t_ys]

    carry_out, ys = scan(step, [*carry, *carry_dot], [*xs, *xs_dot], length=length,
                         reverse=reverse, unroll=unroll)
    return ([*carry_out[:num_carry], *ys[:n_ys]], [*carry_out[num_carry:], *ys[n_ys:]])


scan_p.def_jvp(_scan_jvp)


# --- reverse mode: partial evaluation and transposition ----------------------------------
# Reverse-mode autodiff splits each JVP'd loop or conditional into a known (primal) part
# that runs now and saves residuals, and an unknown (linear) part that is staged and
# later transposed. See ember.transforms.partial_eval for the hook protocol.

while_p.waive("transpose", "reverse-mode differentiation of while_loop needs a static trip "
              "count: use fori_loop with Python-int bounds, or scan")


def _residual_operands(trace, values: Sequence[Any]) -> list[Any]:
    return [trace.pure(v) for v in values]


def _cond_partial_eval(trace, tracers, *, branches):
    index, operands = tracers[0], tracers[1:]
    if not index.is_known:
        return trace.stage(cond_p, tracers, dict(branches=branches))
    in_uk = [not t.is_known for t in operands]
    out_uk = [False] * len(branches[0].outputs)
    while True:  # outputs unknown in any branch are unknown in all
        splits = [transformations.partial_eval_graph(g, in_uk, instantiate=out_uk)
                  for g in branches]
        merged = [any(flags) for flags in zip(*(s[2] for s in splits))]
        if merged == out_uk:
            break
        out_uk = merged
    known_ops = [t.value for t in operands if t.is_known]
    res_avals = [list(s[1].in_avals[:s[3]]) for s in splits]
    n_known_out = out_uk.count(False)

    def known_branch(b: int) -> Callable:
        def run(*args):
            outs = eval_graph(splits[b][0], list(args), bind_equation)
            residuals = outs[n_known_out:]
            padded = []
            for other, avals in enumerate(res_avals):
                padded += residuals if other == b else [
                    np.zeros(a.shape, a.dtype) for a in avals]
            return [*outs[:n_known_out], *padded]
        return run

    known_outs = switch(index.value, [known_branch(b) for b in range(len(branches))],
                        *known_ops)
    residuals = known_outs[n_known_out:]
    unknown_branches = []
    for b, (_, unknown, _, num_res) in enumerate(splits):
        before = [a for avals in res_avals[:b] for a in avals]
        after = [a for avals in res_avals[b + 1:] for a in avals]
        own, rest = unknown.inputs[:num_res], unknown.inputs[num_res:]
        unknown_branches.append(unknown.replace(
            inputs=[*(Var(a) for a in before), *own, *(Var(a) for a in after), *rest]))
    staged = trace.stage(cond_p, [index, *_residual_operands(trace, residuals),
                                  *[t for t in operands if not t.is_known]],
                         dict(branches=tuple(unknown_branches)))
    known_it, staged_it = iter(known_outs[:n_known_out]), iter(staged)
    return [next(staged_it) if uk else next(known_it) for uk in out_uk]


def _cond_transpose(cts, index, *operands, branches):
    linear = [is_undefined_primal(o) for o in operands]
    residuals = [o for o, lin in zip(operands, linear) if not lin]

    def transposed(graph: Graph) -> Callable:
        def run(*args):
            res_it = iter(args[:len(residuals)])
            full = [op if lin else next(res_it) for op, lin in zip(operands, linear)]
            cts_in = transformations.backward_pass(graph, [], full, list(args[len(residuals):]))
            return [instantiate(ct) for ct, lin in zip(cts_in, linear) if lin]
        return run

    outs = switch(index, [transposed(g) for g in branches], *residuals, *cts)
    out_it = iter(outs)
    return [None, *(next(out_it) if lin else None for lin in linear)]


def _scan_partial_eval(trace, tracers, *, body, num_consts, num_carry, length, reverse,
                       unroll):
    consts, carry, xs = _split(tracers, num_consts, num_carry)
    const_uk = [not t.is_known for t in consts]
    xs_uk = [not t.is_known for t in xs]
    carry_uk = [not t.is_known for t in carry]
    n_ys = len(body.outputs) - num_carry
    while True:  # a carry is unknown if its input or its update is
        known_g, unknown_g, out_uk, num_res = transformations.partial_eval_graph(
            body, const_uk + carry_uk + xs_uk, instantiate=carry_uk + [False] * n_ys)
        merged = [a or b for a, b in zip(carry_uk, out_uk[:num_carry])]
        if merged == carry_uk:
            break
        carry_uk = merged
    ys_uk = out_uk[num_carry:]
    known_consts = [t.value for t, uk in zip(consts, const_uk) if not uk]
    # Residuals that are just a known loop constant are passed once, not stacked per step.
    n_known_consts = len(known_consts)
    known_in = known_g.inputs
    res_atoms = known_g.outputs[len(known_g.outputs) - num_res:]
    invariant = [isinstance(a, Var) and a in known_in[:n_known_consts] for a in res_atoms]
    per_step_outputs = [a for a, inv in zip(res_atoms, invariant) if not inv]
    known_body = known_g.replace(
        outputs=[*known_g.outputs[:len(known_g.outputs) - num_res], *per_step_outputs])
    known_body, known_body_consts = hoist_consts(known_body)
    n_known_carry = carry_uk.count(False)
    outs = scan_p.bind(*known_body_consts, *known_consts,
                       *[t.value for t, uk in zip(carry, carry_uk) if not uk],
                       *[t.value for t, uk in zip(xs, xs_uk) if not uk],
                       body=known_body, num_consts=len(known_body_consts) + n_known_consts,
                       num_carry=n_known_carry, length=length, reverse=reverse, unroll=unroll)
    n_known_ys = ys_uk.count(False)
    known_carry_out = outs[:n_known_carry]
    known_ys = outs[n_known_carry:n_known_carry + n_known_ys]
    stacked_res = outs[n_known_carry + n_known_ys:]
    invariant_values = [known_consts[known_in.index(a)]
                        for a, inv in zip(res_atoms, invariant) if inv]
    # Unknown body inputs: (residuals..., unknown consts, unknown carry, unknown xs).
    res_vars = unknown_g.inputs[:num_res]
    rest = unknown_g.inputs[num_res:]
    n_uk_consts, n_uk_carry = const_uk.count(True), carry_uk.count(True)
    inv_vars = [v for v, inv in zip(res_vars, invariant) if inv]
    step_vars = [v for v, inv in zip(res_vars, invariant) if not inv]
    unknown_body = unknown_g.replace(inputs=[
        *inv_vars, *rest[:n_uk_consts], *rest[n_uk_consts:n_uk_consts + n_uk_carry],
        *step_vars, *rest[n_uk_consts + n_uk_carry:]])
    operands = [*_residual_operands(trace, invariant_values),
                *[t for t, uk in zip(consts, const_uk) if uk],
                *[t for t, uk in zip(carry, carry_uk) if uk],
                *_residual_operands(trace, stacked_res),
                *[t for t, uk in zip(xs, xs_uk) if uk]]
    staged = trace.stage(scan_p, operands, dict(
        body=unknown_body, num_consts=len(inv_vars) + n_uk_consts, num_carry=n_uk_carry,
        length=length, reverse=reverse, unroll=unroll))
    known_it = iter([*known_carry_out, *known_ys])
    staged_it = iter(staged)
    return [next(staged_it) if uk else next(known_it) for uk in carry_uk + ys_uk]


def _scan_transpose(cts, *operands, body, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = _split(operands, num_consts, num_carry)
    # The body is linear in every carry. A carry whose initial value is known (a zero
    # tangent made unknown by the fixpoint above) still flows linearly; its own
    # cotangent is simply not returned.
    carry_lin = [is_undefined_primal(c) for c in carry]
    const_lin = [is_undefined_primal(c) for c in consts]
    xs_lin = [is_undefined_primal(x) for x in xs]
    ct_carry, ct_ys = list(cts[:num_carry]), list(cts[num_carry:])
    const_values = [c for c, lin in zip(consts, const_lin) if not lin]
    x_values = [x for x, lin in zip(xs, xs_lin) if not lin]
    lin_const_avals = [c.aval for c, lin in zip(consts, const_lin) if lin]
    carry_avals = [aval_of(c) for c in carry]
    x_lin_avals = [ShapedArray(x.aval.shape[1:], x.aval.dtype) for x, lin in zip(xs, xs_lin)
                   if lin]

    def step(c, x):
        ct_c, acc = c[:num_carry], c[num_carry:]
        x_vals, ct_y = x[:len(x_values)], x[len(x_values):]
        cv, xv = iter(const_values), iter(x_vals)
        args = [UndefinedPrimal(op.aval) if lin else next(cv) for op, lin in zip(consts, const_lin)]
        args += [UndefinedPrimal(a) for a in carry_avals]
        x_it = iter(x_lin_avals)
        args += [UndefinedPrimal(next(x_it)) if lin else next(xv) for lin in xs_lin]
        cts_in = transformations.backward_pass(body, [], args, [*ct_c, *ct_y])
        cts_consts, cts_carry, cts_xs = _split(cts_in, num_consts, num_carry)
        lin_const_cts = [instantiate(ct) for ct, lin in zip(cts_consts, const_lin) if lin]
        new_acc = [a + ct for a, ct in zip(acc, lin_const_cts)]
        ct_x = [instantiate(ct) for ct, lin in zip(cts_xs, xs_lin) if lin]
        return [*(instantiate(ct) for ct in cts_carry), *new_acc], ct_x

    init = [*ct_carry, *(np.zeros(a.shape, a.dtype) for a in lin_const_avals)]
    final, ct_xs = scan(step, init, [*x_values, *ct_ys], length=length, reverse=not reverse,
                        unroll=unroll)
    acc_it, ct_x_it = iter(final[num_carry:]), iter(ct_xs)
    return [*(next(acc_it) if lin else None for lin in const_lin),
            *(ct if lin else None for ct, lin in zip(final[:num_carry], carry_lin)),
            *(next(ct_x_it) if lin else None for lin in xs_lin)]


def _while_partial_eval(trace, tracers, *, cond_graph, body_graph, cond_nconsts,
                        body_nconsts):
    """Known carries run now in a known loop; the whole loop is staged for the unknown
    ones (recomputing the known part inside it). The staged loop can be evaluated
    (forward mode, linearize) but not transposed: reverse mode needs a static trip count."""
    params = dict(cond_graph=cond_graph, body_graph=body_graph, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    cconsts, bconsts, carry = _split(tracers, cond_nconsts, body_nconsts)
    cconst_uk = [not t.is_known for t in cconsts]
    bconst_uk = [not t.is_known for t in bconsts]
    carry_uk = [not t.is_known for t in carry]
    while True:
        known_body, _, out_uk, num_res = transformations.partial_eval_graph(
            body_graph, bconst_uk + carry_uk, instantiate=carry_uk)
        merged = [a or b for a, b in zip(carry_uk, out_uk)]
        if merged == carry_uk:
            break
        carry_uk = merged
    known_cond, _, cond_uk, cond_res = transformations.partial_eval_graph(
        cond_graph, cconst_uk + carry_uk)
    if cond_uk[0] or all(carry_uk):
        return trace.stage(while_p, tracers, params)
    drop = lambda g, n: hoist_consts(g.replace(outputs=g.outputs[:len(g.outputs) - n]))  # noqa: E731
    known_body, body_consts = drop(known_body, num_res)
    known_cond, cond_consts = drop(known_cond, cond_res)
    known_outs = while_p.bind(
        *cond_consts, *[t.value for t, uk in zip(cconsts, cconst_uk) if not uk],
        *body_consts, *[t.value for t, uk in zip(bconsts, bconst_uk) if not uk],
        *[t.value for t, uk in zip(carry, carry_uk) if not uk],
        cond_graph=known_cond, body_graph=known_body,
        cond_nconsts=len(cond_consts) + cconst_uk.count(False),
        body_nconsts=len(body_consts) + bconst_uk.count(False))
    staged = trace.stage(while_p, tracers, params)
    known_it = iter(known_outs)
    return [s if uk else next(known_it) for s, uk in zip(staged, carry_uk)]


transformations.partial_eval_rules.update(
    {while_p: _while_partial_eval, cond_p: _cond_partial_eval, scan_p: _scan_partial_eval})
cond_p.def_transpose(_cond_transpose)
scan_p.def_transpose(_scan_transpose)


for _prim in (cond_p, while_p, scan_p):
    _prim.waive("sharding", "bodies are not partitioned yet: computed on whole operands")
