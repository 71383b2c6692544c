"""Where gather, scatter and the dynamic slices read or write: positions in an array
that depend on data.

A position along each axis of the indexed array (gather's and scatter's operand, a
dynamic slice's operand or update) is an affine part (window offsets, batching
coordinates: index expressions of the kernel's loops) plus, along some axes, a *start*
read from an index operand. A start is clamped into ``[0, upper]`` so that the window
fits (every mode of ``ember.ops.indexing``: 'clip' and 'promise_in_bounds' clamp;
'fill' also clamps the position it reads, then fills or drops the windows whose
unclamped starts were out of bounds). No position ever leaves its array.

Fusion (through ``ember.codegen.access``) uses this to learn where the index operands
are read; lowering turns the starts into int64 nodes added to a load or store.

A gather from an iota (``x.at[...]`` gathers positions from one) reads nothing: the
value is the position itself (``positional``), so the iota is never stored.
"""
from __future__ import annotations

from dataclasses import dataclass

from ember.codegen import indexing as ix
from ember.codegen.indexing import ZERO, Index, Sym
from ember.ir.graph import Eqn, Var

GATHER_LIKE = frozenset({"gather", "dynamic_slice", "dynamic_update_slice"})
# scatter primitive -> how an update combines with the value in place (None: overwrite)
SCATTER_COMBINE = {"scatter": None, "scatter_add": "add", "scatter_mul": "mul",
                   "scatter_min": "min", "scatter_max": "max"}


@dataclass(frozen=True)
class Start:
    """A data-dependent start along axis ``axis``: ``eqn.inputs[operand]`` read at
    ``index``, clamped into ``[0, upper]``."""

    axis: int
    operand: int
    index: Index
    upper: int


@dataclass(frozen=True)
class Positions:
    """A position in the indexed array: ``affine`` per axis, plus the clamped ``starts``;
    ``checked``: out-of-bounds starts fill (gather) or drop (scatter) their window."""

    affine: Index
    starts: tuple[Start, ...]
    checked: bool


def _dnums(eqn: Eqn) -> tuple:
    """Gather's and scatter's dimension numbers share their roles, in this order: window
    axes of the result, operand axes without a window, index map, operand batching
    axes, indices batching axes."""
    return tuple(tuple(int(d) for d in field) for field in eqn.params["dimension_numbers"])


def _windowed(eqn: Eqn) -> list[tuple[int, int]]:
    """(operand axis, window axis of the result or updates) of each axis with a window."""
    window, dropped, _, operand_batch, _ = _dnums(eqn)
    return list(zip([d for d in range(eqn.inputs[0].aval.ndim)
                     if d not in dropped and d not in operand_batch], window))


def window_sizes(eqn: Eqn) -> tuple[int, ...]:
    """The window size along each operand axis."""
    if eqn.prim.name == "gather":
        return tuple(eqn.params["slice_sizes"])
    sizes = [1] * eqn.inputs[0].aval.ndim
    for dim, position in _windowed(eqn):
        sizes[dim] = eqn.inputs[2].aval.shape[position]
    return tuple(sizes)


def indexed_positions(eqn: Eqn, result: Index) -> Positions:
    """The operand position of gather's output (or scatter's update) element at
    ``result``."""
    window, _, index_map, operand_batch, indices_batch = _dnums(eqn)
    operand = eqn.inputs[0].aval
    batch = [form for p, form in enumerate(result) if p not in window]
    affine = [ZERO] * operand.ndim
    for dim, position in _windowed(eqn):
        affine[dim] = result[position]
    for dim, axis in zip(operand_batch, indices_batch):
        affine[dim] = batch[axis]
    sizes = window_sizes(eqn)
    starts = tuple(Start(dim, 1, (*batch, ix.const(k)), operand.shape[dim] - sizes[dim])
                   for k, dim in enumerate(index_map))
    checked = eqn.params["mode"] != "clip" if eqn.prim.name != "gather" \
        else eqn.params["mode"] == "fill"
    return Positions(tuple(affine), starts, checked)


@dataclass(frozen=True)
class Landing:
    """Which update of a scatter whose updates land apart (``lands_apart``) may land on an
    operand position: along each operand axis, the update's window covers ``[start,
    start + size)`` (``starts``: the indexed axes; the others start at 0), walked by an
    axis of the updates (``update_axes``; None: the window has no axis there);
    ``update_index``: where the updates are read, when that is data-independent (every
    window spans its whole axis), else None (they are read from memory)."""

    sizes: tuple[int, ...]
    starts: tuple[Start, ...]
    update_axes: tuple[int | None, ...]
    update_index: Index | None
    checked: bool


def lands_apart(eqn: Eqn) -> bool:
    """Whether no two updates of a scatter can land on one position: every axis of its
    updates outside the windows pairs with an operand axis (a batching axis) or has one
    element. (take_along_axis's gradient, a batched dynamic_update_slice.) Each result
    element is then a value of its own, computed where it is needed, like a gather."""
    window, _, _, _, indices_batch = _dnums(eqn)
    updates = eqn.inputs[2].aval
    batch_axes = [p for p in range(updates.ndim) if p not in window]
    return all(updates.shape[p] == 1 or j in indices_batch for j, p in enumerate(batch_axes))


def windows_span_axes(eqn: Eqn) -> bool:
    """Whether a scatter's windows span the whole of each operand axis they have."""
    sizes = window_sizes(eqn)
    return all(sizes[d] == eqn.inputs[0].aval.shape[d] for d, _ in _windowed(eqn))


def scatter_landing(eqn: Eqn, out: Index) -> Landing:
    """For a scatter whose updates land apart: which one may land at operand position
    ``out``, and where."""
    window, _, index_map, operand_batch, indices_batch = _dnums(eqn)
    operand, updates = eqn.inputs[0].aval, eqn.inputs[2].aval
    batch_axes = [p for p in range(updates.ndim) if p not in window]
    coords = [ix.const(0)] * len(batch_axes)  # the update's position along the batch axes
    update_axes: list[int | None] = [None] * operand.ndim
    sizes = list(window_sizes(eqn))
    for dim, axis in zip(operand_batch, indices_batch):
        coords[axis], update_axes[dim], sizes[dim] = out[dim], batch_axes[axis], operand.shape[dim]
    for dim, position in _windowed(eqn):
        update_axes[dim] = position
    starts = tuple(Start(dim, 1, (*coords, ix.const(k)), operand.shape[dim] - sizes[dim])
                   for k, dim in enumerate(index_map))
    update_index = None
    if windows_span_axes(eqn):
        index = [ix.const(0)] * updates.ndim
        for dim, axis in enumerate(update_axes):
            if axis is not None:
                index[axis] = out[dim]
        update_index = tuple(index)
    return Landing(tuple(sizes), starts, tuple(update_axes), update_index,
                   eqn.params["mode"] != "clip")


def slice_starts(eqn: Eqn) -> tuple[Start, ...]:
    """The clamped starts of a dynamic slice's window (dynamic_slice: in its operand;
    dynamic_update_slice: of its update in the operand), one per axis."""
    operand = eqn.inputs[0].aval
    if eqn.prim.name == "dynamic_slice":
        first, sizes = 1, eqn.outputs[0].aval.shape
    else:
        first, sizes = 2, eqn.inputs[1].aval.shape
    return tuple(Start(axis, first + axis, (), operand.shape[axis] - size)
                 for axis, size in enumerate(sizes))


def start_demands(eqn: Eqn, starts: tuple[Start, ...]) -> list[tuple[object, Index]]:
    """(index operand, where it is read) for each start."""
    return [(eqn.inputs[s.operand], s.index) for s in starts]


def scatter_loop_axes(eqn: Eqn) -> tuple[list[int], list[int]]:
    """The axes of a scatter's updates split into *independent* ones (updates that differ
    along them land on different positions: batching axes, window axes over operand axes
    that are not indexed or that the window spans whole) and the rest, which must run in
    order: two updates that differ only along those may land on one position (repeated
    indices, overlapping windows), and combine in row-major order, as the reference."""
    window, _, index_map, _, indices_batch = _dnums(eqn)
    operand = eqn.inputs[0].aval
    window_dim = {position: dim for dim, position in _windowed(eqn)}
    sizes = window_sizes(eqn)
    batch_axes = [p for p in range(eqn.inputs[2].aval.ndim) if p not in window]
    independent, ordered = [], []
    for position in range(eqn.inputs[2].aval.ndim):
        if position in window_dim:
            dim = window_dim[position]
            free = dim not in index_map or sizes[dim] == operand.shape[dim]
        else:
            free = batch_axes.index(position) in indices_batch
        (independent if free else ordered).append(position)
    return independent, ordered


FLAT = -1  # ``positional``: the value is the flat (row-major) position


def positional(atom, producer: dict) -> int | None:
    """When each element of ``atom`` is its own position: an iota's (along its
    dimension), or a reshaped 1-D iota's (``FLAT``); else None."""
    eqn = producer.get(atom) if isinstance(atom, Var) else None
    if eqn is not None and eqn.prim.name == "reshape":
        inner = producer.get(eqn.inputs[0]) if isinstance(eqn.inputs[0], Var) else None
        if inner is not None and inner.prim.name == "iota" and len(inner.params["shape"]) == 1:
            return FLAT
        return None
    if eqn is not None and eqn.prim.name == "iota":
        return eqn.params["dimension"]
    return None


def ordered_syms(shape: tuple[int, ...], prefix: str = "u") -> tuple[Sym, ...]:
    """Loop variables of a scatter's or scan's own loops (over its updates or result)."""
    return tuple(Sym(f"{prefix}{k}", n) for k, n in enumerate(shape))
