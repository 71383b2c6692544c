"""Collectives across named axes (as ``jax.lax.psum`` and friends), for the bodies of
``ember.shard_map``, ``ember.pmap`` and ``ember.vmap(axis_name=)``.

Each function takes a pytree and an axis name (or, where JAX allows it, a tuple of
names: the reductions and ``axis_index`` treat a tuple as the product of the axes).
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.core.pytree import tree_map
from ember.errors import EmberTypeError
from ember.ops.collectives import (
    all_gather_p, all_to_all_p, axis_extent, axis_index_p, pmax_p, pmin_p,
    ppermute_p, psum_p, psum_scatter_p)

__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute",
           "all_to_all", "axis_index", "axis_size"]

AxisName = Any  # a hashable name, or a tuple of names


def _names(axis_name: AxisName) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _single(axis_name: AxisName, what: str) -> Any:
    names = _names(axis_name)
    if len(names) != 1:
        raise EmberTypeError(f"{what} over several axes {names} is not supported yet; "
                             "apply it once per axis")
    return names[0]


def axis_size(axis_name: AxisName) -> int:
    """The number of shards along ``axis_name`` (the product, for a tuple of names)."""
    size = 1
    for name in _names(axis_name):
        size *= axis_extent(name)
    return size


def _reduce(prim, x: Any, axis_name: AxisName) -> Any:
    def one(leaf: Any) -> Any:
        for name in _names(axis_name):
            leaf = prim.bind(leaf, axis_name=name)
        return leaf

    return tree_map(one, x)


def psum(x: Any, axis_name: AxisName) -> Any:
    """The sum of ``x`` over every shard of the axis, the same on each of them."""
    return _reduce(psum_p, x, axis_name)


def pmean(x: Any, axis_name: AxisName) -> Any:
    """The mean of ``x`` over the shards of the axis."""
    size = axis_size(axis_name)
    return tree_map(lambda leaf: leaf / size, psum(x, axis_name))


def pmax(x: Any, axis_name: AxisName) -> Any:
    return _reduce(pmax_p, x, axis_name)


def pmin(x: Any, axis_name: AxisName) -> Any:
    return _reduce(pmin_p, x, axis_name)


def axis_index(axis_name: AxisName) -> Any:
    """This shard's position along the axis (row-major over a tuple of axes), int32."""
    index = 0
    for name in _names(axis_name):
        index = index * axis_size(name) + axis_index_p.bind(axis_name=name)
    return index


def all_gather(x: Any, axis_name: AxisName, *, axis: int = 0, tiled: bool = False) -> Any:
    """Every shard's ``x``, stacked along a new ``axis`` (concatenated along it: tiled)."""
    name = _single(axis_name, "all_gather")
    size = axis_size(name)

    def one(leaf: Any) -> Any:
        where = axis % (leaf.ndim if tiled else leaf.ndim + 1)
        return all_gather_p.bind(leaf, axis_name=name, axis=where, tiled=tiled,
                                 axis_size=size)

    return tree_map(one, x)


def psum_scatter(x: Any, axis_name: AxisName, *, scatter_dimension: int = 0,
                 tiled: bool = False) -> Any:
    """The psum of ``x``, of which shard ``k`` keeps block ``k`` along
    ``scatter_dimension`` (whose size must be the axis size, or a multiple when tiled)."""
    name = _single(axis_name, "psum_scatter")
    size = axis_size(name)
    return tree_map(lambda leaf: psum_scatter_p.bind(
        leaf, axis_name=name, scatter_dimension=scatter_dimension % leaf.ndim, tiled=tiled,
        axis_size=size), x)


def ppermute(x: Any, axis_name: AxisName, perm: Sequence[tuple[int, int]]) -> Any:
    """Send shard ``src``'s ``x`` to shard ``dst`` for each pair; shards nobody sends to
    receive zeros."""
    name = _single(axis_name, "ppermute")
    size = axis_size(name)
    perm = tuple((int(src), int(dst)) for src, dst in perm)
    for what, column in (("source", 0), ("destination", 1)):
        seen = [pair[column] for pair in perm]
        if len(set(seen)) != len(seen) or not all(0 <= s < size for s in seen):
            raise EmberTypeError(f"ppermute over axis {name!r} of size {size}: every "
                                 f"{what} must appear at most once and lie in "
                                 f"[0, {size}), got perm={perm}")
    return tree_map(lambda leaf: ppermute_p.bind(leaf, axis_name=name, perm=perm), x)


def all_to_all(x: Any, axis_name: AxisName, split_axis: int, concat_axis: int, *,
               tiled: bool = False) -> Any:
    """Split ``x`` into one chunk per shard along ``split_axis``, send chunk ``j`` to
    shard ``j``, and concatenate what arrives along ``concat_axis`` (by source shard).
    Without ``tiled``, ``split_axis`` has the axis size and becomes a new
    ``concat_axis``."""
    name = _single(axis_name, "all_to_all")
    size = axis_size(name)
    return tree_map(lambda leaf: all_to_all_p.bind(
        leaf, axis_name=name, split_axis=split_axis % leaf.ndim,
        concat_axis=concat_axis % leaf.ndim, tiled=tiled, axis_size=size), x)
