"""Gradient bucketing: independent cross-process sums (or maxima, or minima) over the
same processes and dtype become one collective, also inside a loop body; a sum that reads another's result, or crosses other processes,
stays apart; the merged program keeps a valid order (the IR verifier). That the results
do not change is the training tests' part (bitwise equal across process splits)."""
from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.core.abstract import ShapedArray
from ember.core.staging import trace_to_graph
from ember.passes.bucketing import bucket_collectives
from ember.distributed.process_collectives import (
    process_extrema_p, process_extremum_p, process_gather_p, process_gathers_p,
    process_sum_p, process_sums_p)
from ember.ir.graph import subgraphs
from ember.ir.verifier import verify


def _sum(x, ranks=(0, 1), site="psum"):
    return process_sum_p.bind(x, ranks=ranks, site=site)


def _collectives(graph):
    return [(e.prim.name, len(e.inputs)) for e in graph.eqns
            if e.prim in (process_sum_p, process_sums_p, process_gather_p, process_gathers_p,
                          process_extremum_p, process_extrema_p)]


def test_independent_sums_become_one_and_dependent_ones_stay_apart():
    def step(a, b, c):
        ga = _sum(a * 2.0)
        early = jnp.tanh(ga)  # reads the first sum before the others are computed
        gb = _sum(b + 1.0)
        gc = _sum(c)
        again = _sum(early[None] + 0.0)  # reads a sum's result: the next bucket
        other = _sum(c, ranks=(0, 2))  # other processes: a bucket of its own
        return [early, gb, gc, again, other]

    avals = [ShapedArray((2, 3), np.float32), ShapedArray((2, 4), np.float32),
             ShapedArray((2, 3), np.float32)]
    graph = trace_to_graph(lambda *xs: step(*xs), avals)
    assert len(_collectives(graph)) == 5
    merged = bucket_collectives(graph)
    verify(merged)
    assert sorted(_collectives(merged)) == [("process_sum", 1), ("process_sum", 1),
                                            ("process_sums", 3)]
    assert [v.aval for v in merged.outputs] == [v.aval for v in graph.outputs]
    names = [e.prim.name for e in merged.eqns]
    assert names.index("tanh") > names.index("process_sums")  # moved after the bucket


def test_a_program_without_two_independent_sums_is_unchanged():
    graph = trace_to_graph(lambda a: [_sum(jnp.exp(_sum(a))[None])],
                           [ShapedArray((2, 3), np.float32)])
    assert bucket_collectives(graph) is graph


def test_buckets_that_would_read_each_other_are_not_both_merged():
    def step(a, b):
        a1 = _sum(a)
        b2 = _sum(b, ranks=(0, 2))
        b1 = _sum(jnp.tanh(a1)[None], ranks=(0, 2))  # {b1, b2} reads a1 ...
        a2 = _sum(jnp.exp(b2)[None])  # ... and {a1, a2} reads b2
        return [a2, b1]

    avals = [ShapedArray((1, 3), np.float32)] * 2  # one contribution each, as b1's, a2's
    graph = trace_to_graph(lambda *xs: step(*xs), avals)
    merged = bucket_collectives(graph)
    verify(merged)
    assert sorted(_collectives(merged)) == [("process_sum", 1), ("process_sum", 1),
                                            ("process_sums", 2)]


def test_independent_gathers_become_one_apart_from_the_sums():
    def forward(w, b):  # FSDP: every parameter gathered, then used
        gather = lambda v: process_gather_p.bind(v, ranks=(0, 1), offset=0, site="g")  # noqa: E731
        whole_w, whole_b = gather(w), gather(b)
        return [_sum((whole_w * 2.0).sum(axis=1)[None] + whole_b[None])]

    avals = [ShapedArray((2, 3), np.float32), ShapedArray((2,), np.float32)]
    merged = bucket_collectives(trace_to_graph(lambda *xs: forward(*xs), avals))
    verify(merged)
    assert _collectives(merged) == [("process_gathers", 2), ("process_sum", 1)]


def _extremum(x, op="max", ranks=(0, 1)):
    return process_extremum_p.bind(x, op=op, ranks=ranks, site="pmax")


def test_maxima_merge_apart_from_minima_and_sums():
    def step(a, b, c):
        return [_extremum(a), _extremum(b * 2.0), _extremum(c, "min"), _sum(c)]

    avals = [ShapedArray((2, 3), np.float32), ShapedArray((2, 5), np.float32),
             ShapedArray((2, 3), np.float32)]
    merged = bucket_collectives(trace_to_graph(lambda *xs: step(*xs), avals))
    verify(merged)
    assert sorted(_collectives(merged)) == [("process_extrema", 2), ("process_extremum", 1),
                                            ("process_sum", 1)]


def test_collectives_in_a_loop_body_merge_there_and_not_with_those_outside():
    def step(a, b):
        def body(k, carry):
            x, y = carry
            return x + _sum(x[None] * 2.0), y + _sum(y[None])
        x, y = lax.fori_loop(0, 3, body, (a[0], b[0]))
        return [_sum(x[None]), _sum(y[None] + 1.0)]

    avals = [ShapedArray((1, 3), np.float32), ShapedArray((1, 4), np.float32)]
    graph = trace_to_graph(lambda *xs: step(*xs), avals)
    merged = bucket_collectives(graph)
    verify(merged)
    loops = [e for e in merged.eqns if list(subgraphs(e.params))]
    assert len(loops) == 1
    assert [_collectives(body) for body in subgraphs(loops[0].params)
            if _collectives(body)] == [[("process_sums", 2)]]
    assert _collectives(merged) == [("process_sums", 2)]
