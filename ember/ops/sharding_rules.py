"""The vocabulary of sharding rules, and the rule makers primitives share.

A sharding rule says how one equation is split over a mesh. It is asked twice by the
partitioner (``ember.sharding.partitioner``): while propagating, with what is known so
far of its operands' and results' splits, and when the per-device program is written,
with every value's split settled. It answers with a ``ShardingDecision``: the split each
operand is computed with, the split of each local result, the mesh axes over which the
results are partial (a contraction or reduction over a split dimension) and, where the
primitive has size parameters, its parameters at the shard's sizes.

A split (``Dims``) holds one entry per dimension: the tuple of mesh axes splitting it
(major to minor), ``()`` for a whole dimension, or ``None`` where nothing is known.
Rules propose only splits, never "whole": an unsplit dimension spreads nothing, so a
dimension stays open for a later, better-informed proposal (and is whole at the end).
Rules consider operands before results and earlier operands before later ones: that
order is part of the partitioner's documented priority.

Rules are written with plain tuples and axis sizes, so ``ops`` needs nothing from
``ember.sharding``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ember.core.abstract import ShapedArray

Axes = tuple[str, ...]
Dims = tuple["Axes | None", ...]


@dataclass(frozen=True)
class ShardingQuery:
    """What a rule sees of one equation."""

    inputs: Sequence[Dims]
    outputs: Sequence[Dims]
    in_avals: Sequence[ShapedArray]
    out_avals: Sequence[ShapedArray]
    params: Mapping[str, Any]
    mesh: Mapping[str, int]  # axis name -> size

    def parts(self, axes: Axes | None) -> int:
        return math.prod(self.mesh[a] for a in axes or ())


@dataclass
class ShardingDecision:
    """How the equation runs on each shard (see the module docstring)."""

    inputs: list[Dims]
    outputs: list[Dims]
    partial: Axes = ()
    reduce: str = "sum"  # how partial results combine: "sum", "max" or "min"
    params: dict[str, Any] | None = None  # None: the equation's own parameters


def unknown(ndim: int) -> Dims:
    return (None,) * ndim


class DimPicker:
    """Chooses each dimension's split from candidates, using a mesh axis at most once."""

    def __init__(self, query: ShardingQuery) -> None:
        self.query = query
        self.used: set[str] = set()

    def pick(self, candidates: Iterable[Axes | None], size: int) -> Axes | None:
        for axes in candidates:
            if not axes or self.used & set(axes) or size % self.query.parts(axes):
                continue
            self.used |= set(axes)
            return axes
        return None


def dim_of(dims: Dims, d: int | None) -> Axes | None:
    return None if d is None or d >= len(dims) else dims[d]


def elementwise_sharding(query: ShardingQuery) -> ShardingDecision:
    """Operands of the result's shape and the results share one split; operands of
    another shape (scalar bounds, a scalar predicate) stay whole."""
    shape = query.out_avals[0].shape
    same = [dims for dims, aval in zip(query.inputs, query.in_avals) if aval.shape == shape]
    picker = DimPicker(query)
    spec = tuple(picker.pick([dim_of(d, k) for d in (*same, *query.outputs)], size)
                 for k, size in enumerate(shape))
    inputs = [spec if aval.shape == shape else ((),) * aval.ndim for aval in query.in_avals]
    return ShardingDecision(inputs, [spec] * len(query.out_avals))


def mapped_sharding(query: ShardingQuery, in_to_out: Sequence[Sequence[int | None]],
                    params: Callable[[tuple[int, ...]], dict[str, Any]] | None = None,
                    partial: Sequence[int] = (), reduce: str = "sum",
                    creates: bool = False) -> ShardingDecision:
    """The rule of an equation whose result dimensions each come from at most one
    dimension of every operand: ``in_to_out[i][d]`` is the result dimension operand
    ``i``'s dimension ``d`` becomes (None: it must stay whole). Dimensions of operand 0
    listed in ``partial`` are reduced: a split of one makes the result partial.
    ``params``, if given, maps each local result shape to the per-device parameters.
    A result dimension no operand dimension becomes stays whole, unless the equation
    ``creates`` it at the size ``params`` gives (a broadcast)."""
    out = query.out_avals[0]
    picker = DimPicker(query)
    out_spec: list[Axes | None] = [None] * out.ndim
    in_specs = [[None] * aval.ndim for aval in query.in_avals]
    groups: dict[int, list[tuple[int, int]]] = {}
    for i, mapping in enumerate(in_to_out):
        for d, o in enumerate(mapping):
            if o is not None:
                groups.setdefault(o, []).append((i, d))
    for o in range(out.ndim):  # operands first
        members = groups.get(o, [])
        size = math.gcd(out.shape[o], *(query.in_avals[i].shape[d] for i, d in members))
        out_spec[o] = picker.pick([dim_of(query.inputs[i], d) for i, d in members], size)
    reduced: list[str] = []
    for d in partial:
        axes = picker.pick([dim_of(query.inputs[0], d)], query.in_avals[0].shape[d])
        in_specs[0][d] = axes
        reduced += list(axes or ())
    for o in range(out.ndim):  # then what the results are wanted as
        if out_spec[o] is None and (o in groups or creates):
            size = math.gcd(out.shape[o], *(query.in_avals[i].shape[d]
                                            for i, d in groups.get(o, [])))
            out_spec[o] = picker.pick([dim_of(dims, o) for dims in query.outputs], size)
    for o, members in groups.items():
        for i, d in members:
            in_specs[i][d] = out_spec[o]
    local = params(local_shape(out.shape, out_spec, query.mesh)) if params else None
    return ShardingDecision([tuple(s) for s in in_specs], [tuple(out_spec)] *
                            len(query.out_avals), tuple(reduced), reduce, local)


def local_shape(shape: Sequence[int], dims: Dims, mesh: Mapping[str, int]) -> tuple[int, ...]:
    """The shape of one shard of an array of ``shape`` split as ``dims``."""
    return tuple(size // math.prod(mesh[a] for a in (dims[k] if k < len(dims) and dims[k]
                                                        else ()))
                 for k, size in enumerate(shape))


def identity_map(ndim: int, whole: Iterable[int] = ()) -> list[int | None]:
    """Dimension ``d`` becomes result dimension ``d``, except those kept whole."""
    kept = set(whole)
    return [None if d in kept else d for d in range(ndim)]
