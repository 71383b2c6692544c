"""Bucketing: independent collectives of one kind become one (``Primitive.def_bucketing``).

A data-parallel step across processes sums every parameter's gradient, one collective
each (a fully sharded one also gathers every parameter), and every collective is a
meeting of all processes: on a loaded machine each meeting costs a scheduler time slice
or more, whatever the size. This pass merges the equations of a primitive with a
bucketing rule (``ember.distributed``'s ``process_sum``, ``process_extremum`` and
``process_gather``) that agree on its shared params and their operand's dtype and do
not depend on one another into the one equation the rule makes, as DDP buckets
gradients. The rules keep results
bitwise the same (sums still reduce each element in the global order of its
contributions; maxima, minima and gathers are exact), and every process runs the same
pass on the same program, so all of them merge alike. Programs without such equations
pass unchanged. Nested graphs (loop bodies, branches) are bucketed inside, each on its
own: a collective in a loop body runs once per iteration, so it merges only with those
of the same body.

The merged equation goes where its last member was; the equations that read an earlier
member's result and came before that point move after it (a topological order that
otherwise keeps the program's). A bucket that would make a cycle with the buckets
merged before it stays apart.
"""
from __future__ import annotations

import heapq
from typing import Any

from ember.core.primitive import REGISTRY
from ember.ir.graph import Eqn, Graph, Var
from ember.passes.rewrite import in_subgraphs

__all__ = ["bucket_collectives"]


def bucket_collectives(graph: Graph) -> Graph:
    eqns = [in_subgraphs(eqn, bucket_collectives) for eqn in graph.eqns]
    if any(new is not old for new, old in zip(eqns, graph.eqns)):
        graph = graph.replace(eqns=eqns)
    accepted: list[list[int]] = []
    order = None
    for bucket in _buckets(graph, _mergeable()):
        if len(bucket) > 1:
            tried = _ordered(graph.eqns, [*accepted, bucket])
            if tried is not None:  # (else it would close a cycle with those before)
                accepted.append(bucket)
                order = tried
    return graph if order is None else graph.replace(eqns=order)


def _mergeable() -> dict[Any, tuple[str, ...]]:
    """The primitives merged, with the params that members of a bucket share."""
    return {prim: prim.bucketing[0] for prim in REGISTRY.values() if prim.bucketing}


def _buckets(graph: Graph, mergeable: dict[Any, tuple[str, ...]]) -> list[list[int]]:
    """Indices of the mergeable equations, grouped: each group's members of one
    primitive over the same processes and dtype, none depending on another."""
    upstream: dict[Var, int] = {}  # var -> bit set of the collectives it depends on
    open_buckets: dict[Any, tuple[list[int], int]] = {}  # key -> (members, their bits)
    buckets: list[list[int]] = []
    for index, eqn in enumerate(graph.eqns):
        needs = 0
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                needs |= upstream.get(atom, 0)
        if eqn.prim in mergeable:
            operand = eqn.inputs[0].aval
            key = (eqn.prim, *(eqn.params[k] for k in mergeable[eqn.prim]), operand.dtype,
                   operand.shape[0])
            members, bits = open_buckets.get(key, ([], 0))
            if needs & bits:  # reads a member's result: the bucket is full
                members, bits = [], 0
            if not members:
                buckets.append(members)
            members.append(index)
            open_buckets[key] = (members, bits | 1 << index)
            needs |= 1 << index
        for var in eqn.outputs:
            if needs:
                upstream[var] = needs
    return buckets


def _ordered(eqns: list[Eqn], buckets: list[list[int]]) -> list[Eqn] | None:
    """The equations with each bucket merged, in a topological order that keeps the
    original one where it can (each node at its position; a bucket at its last
    member's); None when there is none. The members of one bucket never depend on one
    another, but two buckets can each read the other's results: A1 -> B1 and B2 -> A2
    make {A1, A2} and {B1, B2} a cycle."""
    bucket_of = {i: b for b, members in enumerate(buckets) for i in members}
    nodes: list[tuple[int, Eqn]] = []  # (position, equation)
    for index, eqn in enumerate(eqns):
        if index not in bucket_of:
            nodes.append((index, eqn))
    for members in buckets:
        first = eqns[members[0]]
        nodes.append((members[-1], first.prim.bucketing[1]([eqns[i] for i in members])))
    producer = {var: n for n, (_, eqn) in enumerate(nodes) for var in eqn.outputs}
    waiting = [0] * len(nodes)
    readers: list[list[int]] = [[] for _ in nodes]
    for n, (_, eqn) in enumerate(nodes):
        for source in {producer[a] for a in eqn.inputs if isinstance(a, Var) and a in producer}:
            waiting[n] += 1
            readers[source].append(n)
    ready = [(position, n) for n, (position, _) in enumerate(nodes) if not waiting[n]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(nodes[n][1])
        for reader in readers[n]:
            waiting[reader] -= 1
            if not waiting[reader]:
                heapq.heappush(ready, (nodes[reader][0], reader))
    return order if len(order) == len(nodes) else None
