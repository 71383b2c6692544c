"""Fusion of data-dependent indexing: gathers (and scatters whose updates land apart) are
inlined like elementwise equations (reading a stored array), other scatters and scans
are stored by a kernel of their own that computes their operands in place."""
from __future__ import annotations

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu.backend import cpu_policy
from ember.codegen.c import CRenderer
from ember.passes.fusion import absorb_into_contractions, schedule_groups
from ember.passes.pipeline import run_pipeline

POLICY = cpu_policy(CRenderer(2))
rng = np.random.default_rng(0)
table = rng.standard_normal((32, 16)).astype(np.float32)
ids = rng.integers(0, 32, (4, 8)).astype(np.int32)


def groups_of(fun, *args):
    graph = absorb_into_contractions(run_pipeline(ember.jit(fun).lower(*args).graph, "cpu"),
                                     POLICY)
    return schedule_groups(graph, POLICY).groups


def ops(group) -> set[str]:
    return {eqn.prim.name for eqn in group.members.values()}


def test_a_gather_and_its_elementwise_consumer_are_one_kernel():
    (group,) = groups_of(lambda t, i: jnp.take(t, i, axis=0) * 8.0, table, ids)
    assert group.kind == "loop" and {"gather", "mul"} <= ops(group)


def test_the_array_a_gather_indexes_is_stored_first():
    first, second = groups_of(lambda t, i: jnp.take(jnp.exp(t), i, axis=0), table, ids)
    assert ops(first) == {"exp"} and "read from memory by gather" in first.why_boundary()
    assert "gather" in ops(second)


def test_a_gather_from_an_iota_computes_it_in_place():
    (group,) = groups_of(lambda x, i: x.at[i].add(1.0), np.zeros(9, np.float32), ids[0])
    assert {"iota", "gather", "scatter_add"} <= ops(group)


def test_a_scatter_is_a_kernel_of_its_own_computing_its_updates():
    def fun(t, i, g):
        return ember.grad(lambda t: jnp.sum(jnp.take(t, i, axis=0) * jnp.tanh(g)))(t) * 2.0

    scatter, scale = groups_of(fun, table, ids, np.ones((4, 8, 16), np.float32))
    assert {"scatter_add", "tanh"} <= ops(scatter)
    assert "scatter_add writes data-dependent positions" in scatter.why_boundary()
    assert "mul" in ops(scale)


def test_a_scatter_whose_updates_land_apart_fuses_into_its_consumer():
    def fun(x, i, u):  # one update per row
        dims = lax.ScatterDimensionNumbers((), (1,), (1,), (0,), (0,))
        return lax.scatter_add(x, i, jnp.exp(u), dims) * 2.0

    (group,) = groups_of(fun, np.zeros((4, 9), np.float32), ids[:, :1] % 9,
                         np.ones(4, np.float32))
    assert {"scatter_add", "exp", "mul"} <= ops(group)


def test_a_reduction_read_by_a_scatter_is_stored_first():
    def fun(x, i, u):
        return lax.scatter_add(x, i, u - jnp.max(u), lax.ScatterDimensionNumbers((), (0,), (0,)))

    reduction, scatter = groups_of(fun, np.zeros(5, np.float32), ids[0, :, None] % 5,
                                   np.ones(8, np.float32))
    assert ops(reduction) == {"reduce_max"}
    assert "read by a scatter's or scan's loops" in reduction.why_boundary()
    assert "scatter_add" in ops(scatter)


def test_a_scan_computes_its_operand_in_its_own_loops():
    scan, _ = groups_of(lambda x: lax.cumsum(jnp.exp(x), 1) + 1.0, table)
    assert ops(scan) == {"exp", "cumsum"}
    assert "carries a running value along its axis" in scan.why_boundary()
