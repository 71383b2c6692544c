"""Primitives that cross processes: each runs as a host step (between the native
segments of a compiled program), through ``ember.distributed.host_collectives``.

The operand holds this process's shards of a mesh axis stacked on axis 0; ``ranks``
lists the processes along the axis in order, so the contributions have one global
order. ``site`` names the collective and the program it is in, for the check that
every process is at the same one. They are effectful: no pass folds, merges or drops them, so every process runs
each one, in program order.
"""
from __future__ import annotations

import numpy as np

from ember.core.primitive import Primitive
from ember.ops.rules import deflinear, move_batch_axis

__all__ = ["process_extremum_p", "process_gather_p", "process_sum_p"]


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
