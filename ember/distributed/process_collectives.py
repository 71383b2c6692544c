"""Primitives that cross processes: each runs as a host step (between the native
segments of a compiled program), through ``ember.distributed.host_collectives``.

The operand holds this process's shards of a mesh axis stacked on axis 0; ``ranks``
lists the processes along the axis in order, so the contributions have one global
order. ``site`` names the collective and the program it is in, for the check that
every process is at the same one. They are effectful: no pass folds, merges or drops them, so every process runs
each one, in program order.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core.primitive import Primitive
from ember.ops.rules import deflinear, move_batch_axis

__all__ = ["process_all_to_all_p", "process_extrema_p", "process_extremum_p",
           "process_gather_p", "process_gathers_p", "process_sum_p", "process_sums_p"]


# --- sum (psum): deterministic, in the global order of the shards --------------------

process_sum_p = Primitive("process_sum", effectful=True)
process_sum_p.def_abstract_eval(lambda aval, *, ranks, site: aval.update(shape=aval.shape[1:]))


@process_sum_p.def_impl
def _sum_impl(x, *, ranks, site):
    from ember.distributed.host_collectives import reduce_in_order

    return reduce_in_order(np.asarray(x), ranks, "sum", site)


@process_sum_p.def_batch
def _sum_batch(values, dims, *, ranks, site):
    (x,), (dim,) = values, dims
    return process_sum_p.bind(move_batch_axis(x, dim, 1, np.shape(x)[dim]), ranks=ranks,
                              site=site), 0


def _sum_transpose(ct, x, *, ranks, site):
    local = x.aval.shape[0]
    return [move_batch_axis(ct, None, 0, local)]  # each shard's part of the sum


deflinear(process_sum_p, _sum_transpose)


# --- several sums in one collective (made by ember.passes.bucketing) ---------------

process_sums_p = Primitive("process_sums", multiple_results=True, effectful=True)
process_sums_p.def_abstract_eval(
    lambda *avals, ranks, site: [a.update(shape=a.shape[1:]) for a in avals])
for _rule in ("jvp", "transpose", "batch"):
    process_sums_p.waive(_rule, "made from process_sum by a graph pass, after every "
                                "transformation")


@process_sums_p.def_impl
def _sums_impl(*xs, ranks, site):
    """Every operand's contributions side by side in one buffer, reduced at once:
    each element still sums its contributions in the same order."""
    from ember.distributed.host_collectives import reduce_in_order

    return _side_by_side(xs, lambda rows: reduce_in_order(rows, ranks, "sum", site))


def _side_by_side(xs, reduce) -> list:
    """``reduce`` (of [contribution, elements] to [elements]) of every operand at once:
    their elements side by side in one buffer, each reduced as it would be alone."""
    xs = [np.asarray(x) for x in xs]
    local = xs[0].shape[0]
    total = reduce(np.concatenate([x.reshape(local, -1) for x in xs], axis=1))
    ends = np.cumsum([x[0].size for x in xs])[:-1]
    return [part.reshape(x.shape[1:]) for part, x in zip(np.split(total, ends), xs)]


# --- max and min (pmax, pmin): exact in any order --------------------------------------

process_extremum_p = Primitive("process_extremum", effectful=True)
process_extremum_p.def_abstract_eval(
    lambda aval, *, op, ranks, site: aval.update(shape=aval.shape[1:]))


@process_extremum_p.def_impl
def _extremum_impl(x, *, op, ranks, site):
    from ember.distributed.host_collectives import reduce_in_order

    return reduce_in_order(np.asarray(x), ranks, op, site)


@process_extremum_p.def_batch
def _extremum_batch(values, dims, *, op, ranks, site):
    (x,), (dim,) = values, dims
    return process_extremum_p.bind(move_batch_axis(x, dim, 1, np.shape(x)[dim]), op=op,
                                   ranks=ranks, site=site), 0


process_extremum_p.waive("jvp", "pmax / pmin are not differentiable, as in JAX")
process_extremum_p.waive("transpose", "not linear")


# --- several maxima (or minima) in one collective (made by ember.passes.bucketing) ----

process_extrema_p = Primitive("process_extrema", multiple_results=True, effectful=True)
process_extrema_p.def_abstract_eval(
    lambda *avals, op, ranks, site: [a.update(shape=a.shape[1:]) for a in avals])
for _rule in ("jvp", "transpose", "batch"):
    process_extrema_p.waive(_rule, "made from process_extremum by a graph pass, after "
                                   "every transformation")


@process_extrema_p.def_impl
def _extrema_impl(*xs, op, ranks, site):
    from ember.distributed.host_collectives import reduce_in_order

    return _side_by_side(xs, lambda rows: reduce_in_order(rows, ranks, op, site))


# --- gather (all_gather, ppermute): every process's shards, in global order ------------

process_gather_p = Primitive("process_gather", effectful=True)


@process_gather_p.def_abstract_eval
def _gather_aval(aval, *, ranks, offset, site):
    return aval.update(shape=(aval.shape[0] * len(ranks), *aval.shape[1:]))


@process_gather_p.def_impl
def _gather_impl(x, *, ranks, offset, site):
    from ember.distributed.host_collectives import allgather

    x = np.asarray(x)
    gathered = allgather(x, ranks, site)
    return gathered.reshape(len(ranks) * x.shape[0], *x.shape[1:])


@process_gather_p.def_batch
def _gather_batch(values, dims, *, ranks, offset, site):
    (x,), (dim,) = values, dims
    return process_gather_p.bind(move_batch_axis(x, dim, 1, np.shape(x)[dim]), ranks=ranks,
                                 offset=offset, site=site), 1


def _gather_transpose(ct, x, *, ranks, offset, site):
    from ember.ops.structural import expand_dims, slice_in_dim

    total = process_sum_p.bind(expand_dims(ct, (0,)), ranks=ranks, site=site)
    local = x.aval.shape[0]
    return [slice_in_dim(total, offset, offset + local, axis=0)]


deflinear(process_gather_p, _gather_transpose)


# --- several gathers in one collective (made by ember.passes.bucketing) ------------

process_gathers_p = Primitive("process_gathers", multiple_results=True, effectful=True)
process_gathers_p.def_abstract_eval(
    lambda *avals, ranks, offset, site: [
        a.update(shape=(a.shape[0] * len(ranks), *a.shape[1:])) for a in avals])
for _rule in ("jvp", "transpose", "batch"):
    process_gathers_p.waive(_rule, "made from process_gather by a graph pass, after every "
                                   "transformation")


@process_gathers_p.def_impl
def _gathers_impl(*xs, ranks, offset, site):
    from ember.distributed.host_collectives import allgather

    xs = [np.asarray(x) for x in xs]
    local = xs[0].shape[0]
    every = allgather(np.concatenate([x.reshape(local, -1) for x in xs], axis=1), ranks,
                      site)  # [process, its contribution, every operand's elements]
    ends = np.cumsum([x[0].size for x in xs])[:-1]
    return [part.reshape(len(ranks) * local, *x.shape[1:])
            for part, x in zip(np.split(every, ends, axis=2), xs)]


def _merged_into(many: Primitive) -> Any:
    def merge(eqns: list) -> Any:
        """One ``many`` equation doing ``eqns``, which share their params but the site."""
        from ember.ir.graph import Eqn

        first = eqns[0]
        site = f"{len(eqns)} collectives, the first {first.params['site']}"
        return Eqn(many, [e.inputs[0] for e in eqns], [e.outputs[0] for e in eqns],
                   {**first.params, "site": site}, first.source)
    return merge


process_sum_p.def_bucketing(("ranks",), _merged_into(process_sums_p))
process_extremum_p.def_bucketing(("op", "ranks"), _merged_into(process_extrema_p))
process_gather_p.def_bucketing(("ranks", "offset"), _merged_into(process_gathers_p))


# --- all_to_all: each destination shard's chunks, from every source shard ---------------

process_all_to_all_p = Primitive("process_all_to_all", effectful=True)


@process_all_to_all_p.def_abstract_eval
def _all_to_all_aval(aval, *, ranks, site):
    destinations, sources, *rest = aval.shape
    return aval.update(shape=(destinations // len(ranks), sources * len(ranks), *rest))


@process_all_to_all_p.def_impl
def _all_to_all_impl(x, *, ranks, site):
    """[every destination, this process's sources, ...] -> [this process's
    destinations, every source, ...]: the destinations of process ``ranks[j]`` are
    block j of axis 0, and the blocks received come in the order of ``ranks``."""
    from ember.distributed.host_collectives import alltoall

    x = np.asarray(x)
    count = len(ranks)
    destinations, sources, *rest = x.shape
    mine = destinations // count
    received = alltoall(x, ranks, site).reshape(count, mine, sources, *rest)
    return received.swapaxes(0, 1).reshape(mine, count * sources, *rest)


@process_all_to_all_p.def_batch
def _all_to_all_batch(values, dims, *, ranks, site):
    (x,), (dim,) = values, dims
    return process_all_to_all_p.bind(move_batch_axis(x, dim, 2, np.shape(x)[dim]),
                                     ranks=ranks, site=site), 2


def _all_to_all_transpose(ct, x, *, ranks, site):
    """The same exchange with the roles of destination and source swapped."""
    from ember.ops.structural import transpose

    def swap(value):
        return transpose(value, (1, 0, *range(2, len(value.aval.shape))))

    return [swap(process_all_to_all_p.bind(swap(ct), ranks=ranks, site=site))]


deflinear(process_all_to_all_p, _all_to_all_transpose)


# The partitioner never sees them: shard_map's per-device program makes them, in a
# mesh's process view.
for _prim in (process_sum_p, process_sums_p, process_extremum_p, process_extrema_p,
              process_gather_p, process_gathers_p, process_all_to_all_p):
    _prim.waive("sharding", "a per-process step of a shard_map across processes")
