"""Where an equation reads its operands: operand index expressions from an output index.

This is the one place that knows how each fusible primitive moves data. Fusion uses it
to find at which positions a kernel needs each value (and so whether fusing is legal
and cheap); lowering uses it to build the loads. View primitives (broadcast, transpose,
reshape, squeeze, slice, rev) cost nothing at run time: they only change indices.

Gather and the dynamic slices read an array at data-dependent positions
(``ember.codegen.gather``): that array comes from memory, their index operands are
computed in place; so does a scatter whose updates land apart (``gather.lands_apart``).
Other scatters and cumulative ops are *ordered*: they write their result in loops of
their own (over the updates, or along the scanned axis), which read their operands at
those loops' variables (``gather.ordered_syms``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember.codegen import gather, indexing as ix
from ember.codegen.indexing import ZERO, Index, Sym
from ember.ir.graph import Eqn, Literal, Var
from ember.ops.elementwise import ELEMENTWISE_OPS
from ember.ops.reductions import REDUCTIONS

# name -> function(eqn, output index) -> index of operand 0
_VIEWS: dict[str, Callable[[Eqn, Index], Index]] = {}


def _view(name: str):
    def register(fn: Callable[[Eqn, Index], Index]) -> Callable[[Eqn, Index], Index]:
        _VIEWS[name] = fn
        return fn

    return register


def _in_shape(eqn: Eqn) -> tuple[int, ...]:
    return eqn.inputs[0].aval.shape


@_view("broadcast_in_dim")
def _broadcast(eqn: Eqn, out: Index) -> Index:
    dims = eqn.params["broadcast_dimensions"]
    return tuple(ZERO if size == 1 else out[d] for size, d in zip(_in_shape(eqn), dims))


@_view("transpose")
def _transpose(eqn: Eqn, out: Index) -> Index:
    index = [ZERO] * len(out)
    for k, p in enumerate(eqn.params["permutation"]):
        index[p] = out[k]
    return tuple(index)


@_view("reshape")
def _reshape(eqn: Eqn, out: Index) -> Index:
    flat = ix.linearize(out, eqn.outputs[0].aval.shape)
    return ix.unravel(flat, _in_shape(eqn))


@_view("squeeze")
def _squeeze(eqn: Eqn, out: Index) -> Index:
    dropped = set(eqn.params["dimensions"])
    rest = iter(out)
    return tuple(ZERO if d in dropped else next(rest) for d in range(len(_in_shape(eqn))))


@_view("slice")
def _slice(eqn: Eqn, out: Index) -> Index:
    starts, steps = eqn.params["start_indices"], eqn.params["strides"] or (1,) * len(out)
    return tuple(ix.add(ix.scale(i, step), ix.const(start))
                 for i, start, step in zip(out, starts, steps))


@_view("rev")
def _rev(eqn: Eqn, out: Index) -> Index:
    dims = set(eqn.params["dimensions"])
    shape = _in_shape(eqn)
    return tuple(ix.add(ix.const(shape[d] - 1), ix.scale(i, -1)) if d in dims else i
                 for d, i in enumerate(out))


def _identity(eqn: Eqn, out: Index) -> Index:
    return out


# Identities at run time (their meaning is for transformations).
for _name in ("stop_gradient", "name"):
    _VIEWS[_name] = _identity


def is_view(eqn: Eqn) -> bool:
    return eqn.prim.name in _VIEWS


def keeps_bytes(eqn: Eqn) -> bool:
    """Whether a view's result is its operand's bytes in the same order (a reshape, a
    squeeze, a broadcast that only adds axes of 1, an identity): a buffer holding the
    operand holds the result."""
    name = eqn.prim.name
    if name == "broadcast_in_dim":
        return eqn.outputs[0].aval.size == eqn.inputs[0].aval.size
    return name in ("reshape", "squeeze") or _VIEWS.get(name) is _identity


def view_operand_index(eqn: Eqn, out: Index) -> Index:
    return _VIEWS[eqn.prim.name](eqn, out)


def reduced_axes(eqn: Eqn) -> tuple[int, ...]:
    """The operand axes a reduction (or argmax / argmin) removes."""
    if "axes" in eqn.params:
        return tuple(eqn.params["axes"])
    return (eqn.params["axis"],)


def reduction_syms(extents: tuple[int, ...]) -> tuple[Sym, ...]:
    """Loop variables of a reduction over ``extents``: reductions over equal extents
    share them, so they can share one loop. Only equal extents: a reduction over
    (2, 4) and one over (1, 4) may merge their loops differently, and a variable of
    both would take one reduction's merged form into the other's loops."""
    shape = "x".join(map(str, extents))
    return tuple(Sym(f"r{k}_{shape}", n) for k, n in enumerate(extents))


def is_reduction_sym(sym: Sym) -> bool:
    return sym.name.startswith("r")


def reduction_operand_index(eqn: Eqn, out: Index) -> tuple[Index, tuple[Sym, ...]]:
    """The operand index of a reduction at output position ``out``, and its loop variables."""
    axes = reduced_axes(eqn)
    shape = _in_shape(eqn)
    syms = reduction_syms(tuple(shape[a] for a in axes))
    by_axis = dict(zip(axes, syms))
    rest = iter(out)
    index = tuple(ix.var(by_axis[d]) if d in by_axis else next(rest) for d in range(len(shape)))
    return index, syms


def dot_free_dims(ndim: int, contracting, batch) -> list[int]:
    return [d for d in range(ndim) if d not in contracting and d not in batch]


def dot_operand_indices(eqn: Eqn, out: Index) -> tuple[Index, Index, tuple[Sym, ...]]:
    """lhs and rhs indices of ``dot_general`` at output ``out`` (batch, lhs free, rhs free),
    and the loop variables of the contraction."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs_shape, rhs_shape = eqn.inputs[0].aval.shape, eqn.inputs[1].aval.shape
    syms = reduction_syms(tuple(lhs_shape[d] for d in lc))
    lfree = dot_free_dims(len(lhs_shape), lc, lb)
    rfree = dot_free_dims(len(rhs_shape), rc, rb)
    nb = len(lb)

    def build(ndim, contracting, batch, free, free_offset):
        index = [ZERO] * ndim
        for k, d in enumerate(batch):
            index[d] = out[k]
        for k, d in enumerate(free):
            index[d] = out[free_offset + k]
        for sym, d in zip(syms, contracting):
            index[d] = ix.var(sym)
        return tuple(index)

    lhs = build(len(lhs_shape), lc, lb, lfree, nb)
    rhs = build(len(rhs_shape), rc, rb, rfree, nb + len(lfree))
    return lhs, rhs, syms


def elementwise_operand_index(atom, out: Index) -> Index | None:
    """Elementwise operands share the output index; scalar operands use ``()``."""
    if isinstance(atom, Literal):
        return None
    return () if atom.aval.shape == () else out


def is_expensive(name: str) -> bool:
    """Whether the elementwise primitive ``name`` costs many instructions (its row in
    ``ember.ops.elementwise`` says so): recomputing it is not free."""
    op = ELEMENTWISE_OPS.get(name)
    return op is not None and op.expensive


REDUCTION_PRIMITIVES = frozenset(REDUCTIONS) | {"argmax", "argmin"}


def is_reduction(eqn: Eqn) -> bool:
    """Reductions and contractions: their loop runs over axes their output lacks."""
    return eqn.prim.name in REDUCTION_PRIMITIVES or eqn.prim.name == "dot_general"


# Primitives that read their array operands straight from memory through guarded
# indices: those operands must be in buffers; only the padding value is computed.
GUARDED_PRIMITIVES = frozenset({"pad", "concatenate"})

# cumulative primitive -> the accumulator kind of its running value
SCAN_KIND = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min"}


def _scatter(eqn: Eqn) -> bool:
    return eqn.prim.name in gather.SCATTER_COMBINE


def is_gather_like(eqn: Eqn) -> bool:
    """Gather, the dynamic slices and scatters whose updates land apart: a value at each
    output position, read at a data-dependent position of an array."""
    return eqn.prim.name in gather.GATHER_LIKE or (_scatter(eqn) and gather.lands_apart(eqn))


def is_ordered(eqn: Eqn) -> bool:
    """Other scatters and scans: results written by loops of their own, in an order of
    their own."""
    return (_scatter(eqn) and not gather.lands_apart(eqn)) or eqn.prim.name in SCAN_KIND


def memory_operands(eqn: Eqn, producer: dict | None = None) -> list:
    """Operands an equation reads from buffers rather than computing them in place
    (``producer``: of every value, to spot a gather from an iota, which reads nothing)."""
    name = eqn.prim.name
    if name == "gather" and gather.positional(eqn.inputs[0], producer or {}) is not None:
        return []
    if name in ("pad", "gather", "dynamic_slice"):
        return [eqn.inputs[0]]
    if name == "dynamic_update_slice":
        return [eqn.inputs[1]]
    if is_gather_like(eqn) and _scatter(eqn):  # (updates at data-dependent positions)
        return [] if gather.windows_span_axes(eqn) else [eqn.inputs[2]]
    if name == "concatenate":
        return list(eqn.inputs)
    return []


def stored_through_reshapes(atom: Any, producer: dict) -> Any:
    """The value whose buffer a gather reads for its operand ``atom``: through reshapes,
    which keep every element at the same row-major offset, so the gather reads what
    they reshape in place, at the offsets of ``atom``'s shape (nothing is copied)."""
    while isinstance(atom, Var) and not isinstance(atom, Literal):
        eqn = producer.get(atom)
        if eqn is None or eqn.prim.name != "reshape" or isinstance(eqn.inputs[0], Literal):
            return atom
        atom = eqn.inputs[0]
    return atom


def operand_demands(eqn: Eqn, out: Index) -> list[tuple[object, Index]]:
    """(operand atom, index it is read at) for every array operand, at output ``out``."""
    if eqn.prim.name in GUARDED_PRIMITIVES:
        return [(eqn.inputs[1], ())] if eqn.prim.name == "pad" else []
    if is_gather_like(eqn) or is_ordered(eqn):
        return _indexed_demands(eqn, out)
    if is_view(eqn):
        return [(eqn.inputs[0], view_operand_index(eqn, out))]
    if eqn.prim.name == "dot_general":
        lhs, rhs, _ = dot_operand_indices(eqn, out)
        return [(eqn.inputs[0], lhs), (eqn.inputs[1], rhs)]
    if eqn.prim.name in REDUCTION_PRIMITIVES:
        return [(eqn.inputs[0], reduction_operand_index(eqn, out)[0])]
    return [(atom, elementwise_operand_index(atom, out)) for atom in eqn.inputs
            if not isinstance(atom, Literal)]  # (a literal is no array)


def _indexed_demands(eqn: Eqn, out: Index) -> list[tuple[object, Index]]:
    name = eqn.prim.name
    if name == "gather":
        # (the operand at the static part of its positions: from memory anyway, unless
        # it is an iota, which the gather computes, so it becomes one of its members)
        positions = gather.indexed_positions(eqn, out)
        return [(eqn.inputs[0], positions.affine), *gather.start_demands(eqn, positions.starts)]
    if name == "dynamic_slice":
        return gather.start_demands(eqn, gather.slice_starts(eqn))
    if name == "dynamic_update_slice":
        return [(eqn.inputs[0], out), *gather.start_demands(eqn, gather.slice_starts(eqn))]
    if is_gather_like(eqn):  # a scatter whose updates land apart
        landing = gather.scatter_landing(eqn, out)
        found = [(eqn.inputs[0], out), *gather.start_demands(eqn, landing.starts)]
        if landing.update_index is not None:
            found.append((eqn.inputs[2], landing.update_index))
        return found
    if name in SCAN_KIND:  # read along the scan's own loops
        return [(eqn.inputs[0], ix.identity(gather.ordered_syms(eqn.inputs[0].aval.shape)))]
    updates = ix.identity(gather.ordered_syms(eqn.inputs[2].aval.shape))
    starts = gather.indexed_positions(eqn, updates).starts
    return [(eqn.inputs[0], out), (eqn.inputs[2], updates), *gather.start_demands(eqn, starts)]
