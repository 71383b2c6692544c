"""Data-dependent positions in the kernel IR: the geometry of gather and scatter
(``ember.codegen.gather``), how offsets, combining stores, running values, sequential
loops and barriers render, and how a GPU target maps them."""
from __future__ import annotations

import numpy as np

from ember import lax
from ember.codegen import gather
from ember.codegen import indexing as ix
from ember.codegen.c import CRenderer
from ember.codegen.indexing import Sym
from ember.codegen.kernel_ir import (
    AccInit,
    Accumulator,
    AccUpdate,
    Barrier,
    Buffer,
    Const,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    RunningValue,
    Store,
    split_at_barriers,
)
from ember.codegen.opencl import OpenCLRenderer
from ember.runtime.inspect import make_graph

F32, F16, I64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int64)


def only_eqn(fun, *args, name):
    (eqn,) = [e for e in make_graph(fun)(*args).eqns if e.prim.name == name]
    return eqn


def scatter_eqn(dnums, operand, indices, updates):
    return only_eqn(lambda x, i, u: lax.scatter_add(x, i, u, dnums), operand, indices, updates,
                    name="scatter_add")


def test_an_embedding_gradient_runs_its_tokens_in_order_and_its_row_in_parallel():
    eqn = scatter_eqn(lax.ScatterDimensionNumbers((2,), (0,), (0,)), np.zeros((9, 4)),
                      np.zeros((2, 3, 1), np.int32), np.zeros((2, 3, 4)))
    assert gather.scatter_loop_axes(eqn) == ([2], [0, 1])


def test_batching_axes_and_unindexed_windows_are_independent_indexed_windows_are_not():
    batching = scatter_eqn(lax.ScatterDimensionNumbers((), (1,), (1,), (0,), (0,)),
                           np.zeros((5, 9)), np.zeros((5, 2, 1), np.int32), np.zeros((5, 2)))
    assert gather.scatter_loop_axes(batching) == ([0], [1])
    windows = scatter_eqn(lax.ScatterDimensionNumbers((1,), (), (0,)), np.zeros(8),
                          np.zeros((6, 1), np.int32), np.zeros((6, 3)))
    assert gather.scatter_loop_axes(windows) == ([], [0, 1])


def test_a_window_spanning_its_whole_axis_is_independent():
    """(a batched dynamic_update_slice: a window of whole rows per batch member)"""
    eqn = scatter_eqn(lax.ScatterDimensionNumbers((1, 2), (), (1, 2), (0,), (0,)),
                      np.zeros((4, 6, 5)), np.zeros((4, 2), np.int32), np.zeros((4, 2, 5)))
    assert gather.scatter_loop_axes(eqn) == ([0, 2], [1])


def test_gather_positions_are_window_offsets_plus_clamped_starts():
    eqn = only_eqn(lambda x, i: lax.gather(x, i, lax.GatherDimensionNumbers((1, 2), (), (0, 1)),
                                           (3, 2), mode="fill"),
                   np.zeros((7, 5)), np.zeros((4, 2), np.int32), name="gather")
    b, w0, w1 = Sym("b", 4), Sym("w", 3), Sym("v", 2)
    positions = gather.indexed_positions(eqn, (ix.var(b), ix.var(w0), ix.var(w1)))
    assert positions.affine == (ix.var(w0), ix.var(w1)) and positions.checked
    assert [(s.axis, s.index, s.upper) for s in positions.starts] == [
        (0, (ix.var(b), ix.const(0)), 4), (1, (ix.var(b), ix.const(1)), 3)]


def numbered(*nodes):
    for n, node in enumerate(nodes):
        node.id = n
        node.source = ""
    return nodes


def scatter_kernel(dtype=F32) -> Kernel:
    """out = 0, then out[i, idx[q]] += u[q, i]: the rows independent, the updates in order."""
    i, q = Sym("p0", 4), Sym("q0", 6)
    idx, u, out = Buffer("b0", I64, 6), Buffer("b1", dtype, 24), Buffer("b2", dtype, 12)
    out.written = True
    start = Load(idx, ix.var(q), I64)
    inside = Op("lt", (start, start), np.dtype(np.bool_))
    value = Load(u, ix.add(ix.scale(ix.var(q), 4), ix.var(i)), dtype)
    numbered(start, inside, value)
    store = Store(out, ix.scale(ix.var(i), 3), value, offset=start, combine="add", guard=inside)
    inner = Loop(q, [Let(start), Let(inside), Let(value), store], sequential=True)
    copy = Loop(Sym("i0", 12), [Store(out, ix.var(Sym("i0", 12)), Const(0.0, dtype))])
    return Kernel("scatter", [idx, u, out], [copy, Barrier(), Loop(i, [inner])])


def test_a_combining_store_reads_combines_and_stores_where_its_guard_holds():
    text = CRenderer().render_kernel(scatter_kernel())
    assert "if (t1) b2[3 * p0 + t0] = (b2[3 * p0 + t0] + t2);" in text
    half = CRenderer().render_kernel(scatter_kernel(F16))
    assert ("b2[3 * p0 + t0] = ember_f32_to_f16((ember_f16_to_f32(b2[3 * p0 + t0]) + t2));"
            in half)


def test_a_running_value_is_nan_once_a_nan_was_seen():
    acc = Accumulator("scan0", "max", F32, F32)
    x, out = Buffer("b0", F32, 5), Buffer("b1", F32, 5)
    out.written = True
    q = Sym("q0", 5)
    load, running = numbered(Load(x, ix.var(q), F32), RunningValue(acc))
    body = [Let(load), AccUpdate(acc, load), Let(running), Store(out, ix.var(q), running)]
    text = CRenderer().render_kernel(
        Kernel("cummax", [x, out], [AccInit(acc), Loop(q, body, sequential=True)]))
    assert "float t1 = (scan0_nan ? NAN : scan0);" in text
    assert "#pragma" not in text  # a sequential loop is never parallel nor SIMD


def test_barriers_split_a_kernel_into_parts_with_the_same_parameters():
    kernel = scatter_kernel()
    first, second = split_at_barriers(kernel)
    assert (first.name, second.name) == ("scatter", "scatter_1")
    assert first.params == second.params == kernel.params
    assert split_at_barriers(first) == [first]


def test_a_gpu_spreads_independent_loops_and_runs_sequential_ones_in_each_thread():
    _, updates = split_at_barriers(scatter_kernel())
    text = OpenCLRenderer().render_kernel(updates)
    assert "for (int p0 = (int)(get_group_id(0)) * 256 + tid; p0 < 4;" in text
    assert "for (int q0 = 0; q0 < 6; q0++) {" in text  # not collapsed into the grid loop
    sequential_only = Kernel("k", updates.params, updates.body[0].body)
    text = OpenCLRenderer().render_kernel(sequential_only)
    assert "if (get_group_id(0) == 0 && tid == 0) {" in text  # one thread stores
