"""Collectives over a named axis: psum, pmax, pmin, all_gather, psum_scatter, ppermute,
all_to_all, axis_index (the primitives behind ``ember.lax.psum`` and friends).

A collective's per-shard meaning (abstract eval, jvp, transpose) is defined here like
any primitive's. Its execution is a *named batching rule*: inside ``shard_map``,
``pmap`` or ``vmap(axis_name=)`` every shard is one member of a batch interpreter for
that axis (see ``ember.transforms.vmap``), so a collective over the axis is an
operation across the batch, e.g. psum over axis 'i' is a sum over the mapped axis.
The whole SPMD program is then one ordinary program over all shards, which every
backend compiles once, whatever the number of devices (JAX's original design for
pmap's collectives). Collectives over *another* axis use the ordinary batch rule.

Transposes follow JAX 0.10 with ``check_vma=True``: psum's output is invariant across
the axis, so its transpose hands each shard the cotangent as it is (a ``pvary``);
all_gather and psum_scatter transpose into each other, ppermute into the inverse
permutation, all_to_all into the swapped one.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.core.trace import _trace_stack, bind_with_trace, find_top_trace
from ember.errors import EmberValueError
from ember.ops import transformations
from ember.ops.rules import (
    def_elementwise_batch, deflinear, defjvp_zero, move_batch_axis)

__all__ = ["axis_extent", "axis_frame", "psum_p", "pmax_p", "pmin_p", "all_gather_p", "psum_scatter_p",
           "ppermute_p", "all_to_all_p", "axis_index_p"]


class UnboundAxisError(NameError):
    """A collective named an axis that no enclosing shard_map / pmap / vmap binds."""


def axis_frame(name: Any):
    """The innermost active batch interpreter mapping over axis ``name`` (its MainTrace)."""
    bound = []
    for main in reversed(_trace_stack):
        if main.trace_type is transformations.batch_trace and main.global_data.name is not None:
            if main.global_data.name == name:
                return main
            bound.append(main.global_data.name)
    raise UnboundAxisError(
        f"unbound axis name: {name!r}. Collectives may only name axes bound by an "
        f"enclosing shard_map (mesh axes), pmap or vmap(axis_name=); bound here: "
        f"{sorted(map(str, bound)) or 'none'}")


class CollectivePrimitive(Primitive):
    """A primitive over the axis ``params['axis_name']``: bound in (at least) the trace
    that maps over that axis, even when no argument comes from it (``axis_index``)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.named_batch_rule = None

    def def_named_batch(self, fn):
        self.named_batch_rule = fn
        return fn

    def bind(self, *args: Any, **params: Any) -> Any:
        main = axis_frame(params["axis_name"])
        trace = find_top_trace(args)
        if trace.main.level < main.level:
            trace = main.trace_type(main)
        return bind_with_trace(self, trace, args, params)


# Hook of ember.distributed: a mesh axis that crosses processes is mapped over this
# process's shards only; its ProcessSpan (None for an axis inside one process) takes
# over the collectives' named batch rules, which then go across processes.
process_span: Callable[[Any], Any] = lambda axis_name: None


def axis_extent(name: Any) -> int:
    """The number of shards along axis ``name``, across every process."""
    span = process_span(name)
    return span.size if span is not None else axis_frame(name).global_data.size


def _no_impl(name: str):
    def impl(*args: Any, **params: Any):
        raise UnboundAxisError(f"{name} over axis {params['axis_name']!r} ran outside the "
                               "shard_map / pmap / vmap that binds the axis")
    return impl


def _same(aval: ShapedArray, **params: Any) -> ShapedArray:
    return aval


def _np():
    import ember.numpy as enp

    return enp


def _at_front(x: Any, dim: int | None, size: int) -> Any:
    return move_batch_axis(x, dim, 0, size)


# --- psum, pmax, pmin: reductions across the axis ---------------------------------------

def _reduction(name: str, reduce: str, invariant_scale: bool) -> CollectivePrimitive:
    prim = CollectivePrimitive(name)
    prim.def_abstract_eval(_same)
    prim.def_impl(_no_impl(name))
    def_elementwise_batch(prim)

    @prim.def_named_batch
    def named(values, dims, size, *, axis_name):
        (x,), (dim,) = values, dims
        span = process_span(axis_name)
        if span is not None:
            return span.reduce(reduce, x, dim), None
        if dim is None:  # the same on every shard
            return (x * size if invariant_scale else x), None
        return getattr(_np(), reduce)(x, axis=dim), None

    return prim


psum_p = _reduction("psum", "sum", invariant_scale=True)
pmax_p = _reduction("pmax", "max", invariant_scale=False)
pmin_p = _reduction("pmin", "min", invariant_scale=False)
deflinear(psum_p, lambda ct, x, *, axis_name: [ct])  # invariant -> varying: a pvary
for _prim in (pmax_p, pmin_p):
    _prim.waive("jvp", "not differentiable, as in JAX")
    _prim.waive("transpose", "not linear")


# --- all_gather and psum_scatter --------------------------------------------------------

all_gather_p = CollectivePrimitive("all_gather")
all_gather_p.def_impl(_no_impl("all_gather"))


@all_gather_p.def_abstract_eval
def _all_gather_aval(aval, *, axis_name, axis, tiled, axis_size):
    shape = list(aval.shape)
    if tiled:
        shape[axis] *= axis_size
    else:
        shape.insert(axis, axis_size)
    return aval.update(shape=tuple(shape))


@all_gather_p.def_batch
def _all_gather_batch(values, dims, *, axis, **params):
    (x,), (dim,) = values, dims
    return all_gather_p.bind(_at_front(x, dim, 0), axis=axis + 1, **params), 0


@all_gather_p.def_named_batch
def _all_gather_named(values, dims, size, *, axis_name, axis, tiled, axis_size):
    (x,), (dim,) = values, dims
    enp = _np()
    span = process_span(axis_name)
    x = _at_front(x, dim, size) if span is None else span.gather(x, dim)
    gathered = enp.moveaxis(x, 0, axis)
    if tiled:
        shape = list(gathered.shape)
        shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
        gathered = enp.reshape(gathered, shape)
    # Varying across the axis, as in JAX (every shard holds its own copy).
    return move_batch_axis(gathered, None, 0, size if span is None else span.local), 0


psum_scatter_p = CollectivePrimitive("psum_scatter")
psum_scatter_p.def_impl(_no_impl("psum_scatter"))


@psum_scatter_p.def_abstract_eval
def _psum_scatter_aval(aval, *, axis_name, scatter_dimension, tiled, axis_size):
    shape = list(aval.shape)
    dim, n = scatter_dimension, shape[scatter_dimension]
    if (tiled and n % axis_size) or (not tiled and n != axis_size):
        need = f"a multiple of {axis_size}" if tiled else f"equal to {axis_size}"
        raise EmberValueError(f"psum_scatter over axis {axis_name!r}: dimension {dim} has "
                              f"size {n}, which must be {need} (the axis size)")
    if tiled:
        shape[dim] //= axis_size
    else:
        del shape[dim]
    return aval.update(shape=tuple(shape))


@psum_scatter_p.def_batch
def _psum_scatter_batch(values, dims, *, scatter_dimension, **params):
    (x,), (dim,) = values, dims
    return psum_scatter_p.bind(_at_front(x, dim, 0),
                               scatter_dimension=scatter_dimension + 1, **params), 0


@psum_scatter_p.def_named_batch
def _psum_scatter_named(values, dims, size, *, axis_name, scatter_dimension, tiled,
                        axis_size):
    (x,), (dim,) = values, dims
    enp = _np()
    span = process_span(axis_name)
    if span is not None:
        total, size = span.reduce("sum", x, dim), span.size
    else:
        total = x * size if dim is None else enp.sum(x, axis=dim)
    if tiled:
        shape = list(total.shape)
        shape[scatter_dimension:scatter_dimension + 1] = [size,
                                                          shape[scatter_dimension] // size]
        total = enp.reshape(total, shape)
    if span is not None:
        total = span.mine(total, scatter_dimension)
    return total, scatter_dimension


def _all_gather_transpose(ct, x, *, axis_name, axis, tiled, axis_size):
    return [psum_scatter_p.bind(ct, axis_name=axis_name, scatter_dimension=axis,
                                tiled=tiled, axis_size=axis_size)]


def _psum_scatter_transpose(ct, x, *, axis_name, scatter_dimension, tiled, axis_size):
    return [all_gather_p.bind(ct, axis_name=axis_name, axis=scatter_dimension, tiled=tiled,
                              axis_size=axis_size)]


deflinear(all_gather_p, _all_gather_transpose)
deflinear(psum_scatter_p, _psum_scatter_transpose)


# --- ppermute ---------------------------------------------------------------------------

ppermute_p = CollectivePrimitive("ppermute")
ppermute_p.def_impl(_no_impl("ppermute"))
ppermute_p.def_abstract_eval(_same)
def_elementwise_batch(ppermute_p)


@ppermute_p.def_named_batch
def _ppermute_named(values, dims, size, *, axis_name, perm):
    (x,), (dim,) = values, dims
    enp = _np()
    span = process_span(axis_name)
    total = size if span is None else span.size
    source = np.full(total, -1)
    for src, dst in perm:
        source[dst] = src
    if span is None:
        x = _at_front(x, dim, size)
    else:  # every shard of the axis, then the sources of this process's shards
        x = span.gather(x, dim)
        source = span.sources(source)  # (a traced value on a device thread's span)
    nonnegative = np.maximum if isinstance(source, np.ndarray) else enp.maximum
    moved = enp.take(x, nonnegative(source, 0), axis=0)
    received = (source >= 0).reshape((size,) + (1,) * (x.ndim - 1))
    return enp.where(received, moved, enp.zeros_like(moved)), 0


def _ppermute_transpose(ct, x, *, axis_name, perm):
    inverse = tuple((dst, src) for src, dst in perm)
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=inverse)]


deflinear(ppermute_p, _ppermute_transpose)


# --- all_to_all -------------------------------------------------------------------------

all_to_all_p = CollectivePrimitive("all_to_all")
all_to_all_p.def_impl(_no_impl("all_to_all"))


@all_to_all_p.def_abstract_eval
def _all_to_all_aval(aval, *, axis_name, split_axis, concat_axis, tiled, axis_size):
    shape = list(aval.shape)
    n = shape[split_axis]
    if (tiled and n % axis_size) or (not tiled and n != axis_size):
        need = f"a multiple of {axis_size}" if tiled else f"equal to {axis_size}"
        raise EmberValueError(f"all_to_all over axis {axis_name!r}: split_axis {split_axis} "
                              f"has size {n}, which must be {need} (the axis size)")
    if tiled:
        shape[split_axis] //= axis_size
        shape[concat_axis] *= axis_size
    else:
        del shape[split_axis]
        shape.insert(concat_axis, axis_size)
    return aval.update(shape=tuple(shape))


@all_to_all_p.def_batch
def _all_to_all_batch(values, dims, *, split_axis, concat_axis, **params):
    (x,), (dim,) = values, dims
    return all_to_all_p.bind(_at_front(x, dim, 0), split_axis=split_axis + 1,
                             concat_axis=concat_axis + 1, **params), 0


@all_to_all_p.def_named_batch
def _all_to_all_named(values, dims, size, *, axis_name, split_axis, concat_axis, tiled,
                      axis_size):
    """Shard i's chunk j goes to shard j, which concatenates the chunks by source i.
    Across processes, each process holds some sources and keeps some destinations."""
    (x,), (dim,) = values, dims
    enp = _np()
    span = process_span(axis_name)
    total = size if span is None else span.size
    x = _at_front(x, dim, size)  # [source, ...per-shard...]
    split = split_axis + 1
    if tiled:
        shape = list(x.shape)
        shape[split:split + 1] = [total, shape[split] // total]
        x = enp.reshape(x, shape)  # [source, ..., destination, chunk, ...]
    x = enp.moveaxis(x, split, 0)  # [destination, source, ...]
    if span is not None:  # this process's destinations, from every source
        x = span.exchange(x)
    x = enp.moveaxis(x, 1, concat_axis + 1)  # the sources sit where they concatenate
    if tiled:
        shape = list(x.shape)
        at = concat_axis + 1
        shape[at:at + 2] = [shape[at] * shape[at + 1]]
        x = enp.reshape(x, shape)
    return x, 0


def _all_to_all_transpose(ct, x, *, axis_name, split_axis, concat_axis, tiled, axis_size):
    return [all_to_all_p.bind(ct, axis_name=axis_name, split_axis=concat_axis,
                              concat_axis=split_axis, tiled=tiled, axis_size=axis_size)]


deflinear(all_to_all_p, _all_to_all_transpose)


# --- axis_index -------------------------------------------------------------------------

axis_index_p = CollectivePrimitive("axis_index")
axis_index_p.def_impl(_no_impl("axis_index"))
axis_index_p.def_abstract_eval(lambda *, axis_name: ShapedArray((), np.int32))
defjvp_zero(axis_index_p)
axis_index_p.waive("transpose", "integer-valued, takes no operand")
axis_index_p.waive("batch", "takes no operand, so it is never batched over another axis")


@axis_index_p.def_named_batch
def _axis_index_named(values: Sequence[Any], dims, size, *, axis_name):
    from ember.ops.structural import iota

    span = process_span(axis_name)
    return (iota(np.int32, size) if span is None else span.axis_index()), 0


# The partitioner inserts collectives; a global program that names a mesh axis itself
# belongs in shard_map.
for _prim in (psum_p, pmax_p, pmin_p, all_gather_p, psum_scatter_p, ppermute_p, all_to_all_p,
              axis_index_p):
    _prim.waive("sharding", "a per-device operation: it appears only inside shard_map")
