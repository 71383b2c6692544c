"""Lowering data-dependent reads and writes to kernel IR nodes: gather, the dynamic
slices, and the per-element work of scatters and scans (their loops are planned and
emitted by ``ember.codegen.lower``).

A start read from an index operand becomes an int64 node (unsigned values saturate
first: huge ones are out of bounds anyway), clamped into range; the clamped starts,
times the strides of their axes, sum to the ``offset`` node of a ``Load`` or ``Store``.
A start that is a constant folds into the affine index instead, and so does, where a
gather or dynamic slice reads, a start computed from iotas as an affine form of the
loop variables that stays in range (im2col's patch positions): the read is then a
plain strided one, with no clamp per element to compute (or for the C compiler to
optimize). Out-of-bounds checks ('fill' gathers, dropping scatters) test the
unclamped starts. The builder ``b`` is lowering's node builder (``value``, ``op``,
``const``, ``load``, ``index_value``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ember.codegen import access, gather, indexing as ix
from ember.codegen.gather import Start
from ember.codegen.indexing import Affine, Index
from ember.codegen.kernel_ir import Accumulator, Const, IndexValue, Node, Op, RunningValue
from ember.ir.graph import Eqn, Var
from ember.ops.indexing import default_fill_value
from ember.ops.reductions import accumulator_dtype

INT64, UINT64, BOOL = np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.bool_)
_INT64_MAX = np.iinfo(np.int64).max
# accumulator kind -> the op that combines two values (a scan's, a column reduction's)
COMBINE = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}


@dataclass
class _StartValue:
    start: Start
    raw: Node | None  # the index operand's value, as int64 (None: ``affine``)
    clamped: Node | None
    affine: Affine | None = None  # the start as a form of the loops, always in range


def _starts(b, eqn: Eqn, starts: tuple[Start, ...],
            fold_affine: bool = False) -> list[_StartValue]:
    """The starts' values; with ``fold_affine``, as affine forms where they are ones."""
    found = []
    for start in starts:
        value = b.value(eqn.inputs[start.operand], start.index)
        form = _affine_value(value) if fold_affine else None
        if form is not None and _within(form, 0, start.upper):
            found.append(_StartValue(start, None, None, form))
            continue
        raw = _as_int64(b, value)
        found.append(_StartValue(start, raw, _clamp(b, raw, start.upper)))
    return found


def _within(form: Affine, lo: int, hi: int) -> bool:
    low, high = ix.bounds(form)
    return lo <= low and high <= hi


def _affine_value(node: Node, seen: dict | None = None) -> Affine | None:
    """``node`` as an affine form of the loop variables, where it is one: iotas combined
    by integer add, sub, neg, multiplication by a constant, conversions, and selections
    whose choice is the same everywhere (NumPy's wrapping of negative indices, where
    none is negative); no step may leave its dtype's range (so no wrap-around is folded
    away). ``seen``: forms found so far (the nodes are a DAG)."""
    seen = {} if seen is None else seen
    if node.id not in seen:
        seen[node.id] = _affine_of(node, seen)
    return seen[node.id]


def _affine_of(node: Node, seen: dict) -> Affine | None:
    if not np.issubdtype(node.dtype, np.integer):
        return None
    if isinstance(node, Const):
        form = ix.const(int(node.value))
    elif isinstance(node, IndexValue):
        form = node.index
    elif isinstance(node, Op):
        form = _affine_op(node, seen)
    else:
        return None
    info = np.iinfo(node.dtype)
    return form if form is not None and _within(form, int(info.min), int(info.max)) else None


def _affine_op(node: Op, seen: dict) -> Affine | None:
    if node.op == "select_n" and len(node.args) == 3:
        chosen = _known_truth(node.args[0], seen)
        return None if chosen is None else _affine_value(node.args[1 + chosen], seen)
    forms = [_affine_value(arg, seen) for arg in node.args]
    if any(form is None for form in forms):
        return None
    if node.op == "convert_element_type":
        return forms[0]
    if node.op == "add":
        return ix.add(*forms)
    if node.op == "sub":
        return ix.add(forms[0], ix.scale(forms[1], -1))
    if node.op == "neg":
        return ix.scale(forms[0], -1)
    if node.op == "mul":
        constant = [f for f in forms if not f.terms]
        if constant:
            other = forms[1] if constant[0] is forms[0] else forms[0]
            return ix.scale(other, constant[0].const)
    return None


# comparison of x and y -> (always, never) from the bounds of x - y
_COMPARE = {"lt": lambda lo, hi: (hi < 0, lo >= 0), "le": lambda lo, hi: (hi <= 0, lo > 0),
            "gt": lambda lo, hi: (lo > 0, hi <= 0), "ge": lambda lo, hi: (lo >= 0, hi < 0)}


def _known_truth(node: Node, seen: dict) -> bool | None:
    """The value of a comparison of affine forms where it is the same everywhere."""
    if not (isinstance(node, Op) and node.op in _COMPARE):
        return None
    forms = [_affine_value(arg, seen) for arg in node.args]
    if any(form is None for form in forms):
        return None
    always, never = _COMPARE[node.op](*ix.bounds(ix.add(forms[0], ix.scale(forms[1], -1))))
    return True if always else False if never else None


def _as_int64(b, node: Node) -> Node:
    if isinstance(node, Const):
        return b.const(min(int(node.value), _INT64_MAX), INT64)
    if node.dtype == UINT64:
        node = b.op("min", (node, b.const(_INT64_MAX, UINT64)), UINT64)
    return b.convert(node, INT64)


def _clamp(b, raw: Node, upper: int) -> Node:
    if isinstance(raw, Const) or upper == 0:
        value = raw.value if isinstance(raw, Const) else 0
        return b.const(min(max(value, 0), upper), INT64)
    low = b.op("max", (raw, b.const(0, INT64)), INT64)
    return b.op("min", (low, b.const(upper, INT64)), INT64)


def _weighted_sum(b, terms: list[tuple[Node, int]]) -> Node | None:
    """``sum(node * weight)`` as int64 nodes (None for no terms)."""
    total = None
    for node, weight in terms:
        if weight != 1:
            node = b.op("mul", (node, b.const(weight, INT64)), INT64)
        total = node if total is None else b.op("add", (total, node), INT64)
    return total


def _place(b, shape: tuple[int, ...], affine: Index,
           starts: list[_StartValue]) -> tuple[Index, Node | None]:
    """A position in an array of ``shape``: its affine index (constant starts folded in)
    and the data-dependent offset of the other starts."""
    forms = list(affine)
    strides = ix.row_major_strides(shape)
    terms = []
    for value in starts:
        axis = value.start.axis
        if value.affine is not None:
            forms[axis] = ix.add(forms[axis], value.affine)
        elif isinstance(value.clamped, Const):
            forms[axis] = ix.add(forms[axis], ix.const(value.clamped.value))
        else:
            terms.append((value.clamped, strides[axis]))
    return tuple(forms), _weighted_sum(b, terms)


def _in_bounds(b, starts: list[_StartValue]) -> Node | None:
    """Whether every unclamped start lets its window fit (None: always)."""
    conds = []
    for value in starts:
        raw, upper = value.raw, value.start.upper
        if value.affine is not None:  # (in range by construction)
            continue
        if isinstance(raw, Const):
            if not 0 <= raw.value <= upper:
                conds.append(b.const(False, BOOL))
            continue
        low = b.op("ge", (raw, b.const(0, INT64)), BOOL)
        conds.append(b.op("and", (low, b.op("le", (raw, b.const(upper, INT64)), BOOL)), BOOL))
    return b.all_of(conds)


def _read(b, atom, index: Index, offset: Node | None, prim: str, guard: Node | None = None,
          shape: tuple[int, ...] | None = None):
    """``atom`` at ``index`` (of ``shape``, where it reads ``atom`` through reshapes)."""
    if not isinstance(atom, Var):  # a literal scalar: the same everywhere
        return b.value(atom, ())
    return b.load(atom, index, guard, offset, prim, shape)


# --- values at an output position -----------------------------------------------------

def gather_value(b, eqn: Eqn, index: Index) -> Node:
    operand = eqn.inputs[0]
    positions = gather.indexed_positions(eqn, index)
    starts = _starts(b, eqn, positions.starts, fold_affine=True)
    where, offset = _place(b, operand.aval.shape, positions.affine, starts)
    axis = gather.positional(operand, b.group.producer)
    if axis is None:
        stored = access.stored_through_reshapes(operand, b.group.producer)
        value = _read(b, stored, where, offset, "gather", shape=operand.aval.shape)
    else:
        value = _position(b, axis, where, offset, starts, operand.aval)
    inside = _in_bounds(b, starts) if positions.checked else None
    if inside is None:
        return value
    fill = _fill_value(eqn)
    return b.op("select_n", (inside, b.const(fill, value.dtype), value), value.dtype)


def _position(b, axis: int, where: Index, offset: Node | None, starts: list[_StartValue],
              aval) -> Node:
    """The value of an iota (``gather.positional``) at a gathered position."""
    if axis == gather.FLAT:
        form, extra = ix.linearize(where, aval.shape), offset
    else:
        form = where[axis]
        extra = next((v.clamped for v in starts if v.start.axis == axis
                      and v.affine is None and not isinstance(v.clamped, Const)), None)
    value = b.index_value(form, INT64)
    if extra is not None:
        value = b.op("add", (value, extra), INT64)
    return b.convert(value, aval.dtype)


def _fill_value(eqn: Eqn):
    """What a 'fill' gather reads out of bounds (as ``ember.ops.indexing``)."""
    dtype = eqn.outputs[0].aval.dtype
    value = eqn.params["fill_value"]
    value = default_fill_value(dtype) if value is None else value
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(value).astype(dtype).item()


def dynamic_slice_value(b, eqn: Eqn, index: Index) -> Node:
    operand = eqn.inputs[0]
    starts = _starts(b, eqn, gather.slice_starts(eqn), fold_affine=True)
    where, offset = _place(b, operand.aval.shape, index, starts)
    return _read(b, operand, where, offset, "dynamic_slice")


def dynamic_update_value(b, eqn: Eqn, index: Index) -> Node:
    """The update where ``index`` falls inside its (clamped) window, else the operand."""
    update = eqn.inputs[1]
    starts = {v.start.axis: v for v in _starts(b, eqn, gather.slice_starts(eqn))}
    return _landed(b, eqn, index, update, update.aval.shape, starts,
                   tuple(range(update.aval.ndim)), None, [], None)


def scatter_value(b, eqn: Eqn, index: Index) -> Node:
    """A scatter whose updates land apart (``gather.lands_apart``), at operand position
    ``index``: the update landing there combined with the operand, else the operand."""
    landing = gather.scatter_landing(eqn, index)
    starts = _starts(b, eqn, landing.starts)
    checks = [_in_bounds(b, starts)] if landing.checked else []
    return _landed(b, eqn, index, eqn.inputs[2], landing.sizes,
                   {v.start.axis: v for v in starts}, landing.update_axes,
                   gather.SCATTER_COMBINE[eqn.prim.name], checks, landing.update_index)


def _landed(b, eqn: Eqn, index: Index, update, sizes, starts: dict[int, _StartValue],
            update_axes, combine: str | None, checks: list, update_index: Index | None):
    """The value at operand position ``index`` where the window of ``update`` covers
    ``[start, start + size)`` along each axis (walked by ``update_axes``; ``checks``:
    more conditions): read from memory where it does (``update_index``: a position to
    compute it at instead), combined with the operand's value (None: replacing it)."""
    operand = eqn.inputs[0]
    strides = ix.row_major_strides(update.aval.shape)
    where, conds, terms = [ix.const(0)] * update.aval.ndim, list(checks), []
    for axis, (form, size) in enumerate(zip(index, sizes)):
        value, along = starts.get(axis), update_axes[axis]
        if value is None or isinstance(value.clamped, Const):
            start = value.clamped.value if value is not None else 0
            conds.append(b.index_cond(form, start, start + size - 1, 1))
            relative = ix.add(form, ix.const(-start))
        else:
            offset = b.op("sub", (b.index_value(form, INT64), value.clamped), INT64)
            low = b.op("ge", (offset, b.const(0, INT64)), BOOL)
            conds.append(b.op("and", (low, b.op("lt", (offset, b.const(size, INT64)), BOOL)),
                              BOOL))
            relative = form
            if along is not None:
                terms.append((value.clamped, -strides[along]))
        if along is not None:
            where[along] = relative
    inside = b.all_of(conds)
    if update_index is not None:
        new = b.value(update, update_index)
    else:
        new = _read(b, update, tuple(where), _weighted_sum(b, terms), eqn.prim.name, inside)
    old = b.value(operand, index)
    if combine is not None:
        new = b.op(combine, (old, new), new.dtype)
    if inside is None:
        return new
    return b.op("select_n", (inside, old, new), new.dtype)


# --- one iteration of a scatter's or a scan's own loops ---------------------------------

@dataclass(eq=False)
class OrderedStep:
    """What one iteration of an ordered nest does: ``AccUpdate(acc, update)`` first when
    ``acc`` is set (a scan), then store ``value`` at ``index + offset`` (combined by
    ``combine``, only where ``guard`` holds)."""

    index: Affine
    value: Node
    offset: Node | None = None
    combine: str | None = None
    guard: Node | None = None
    acc: Accumulator | None = None
    update: Node | None = None


def ordered_axes(eqn: Eqn) -> tuple[tuple[int, ...], list[int], list[int]]:
    """The shape an ordered nest loops over, its independent axes and its axes that run
    in order."""
    if eqn.prim.name in access.SCAN_KIND:
        shape = eqn.inputs[0].aval.shape
        axis = eqn.params["axis"]
        return shape, [a for a in range(len(shape)) if a != axis], [axis]
    independent, ordered = gather.scatter_loop_axes(eqn)
    return eqn.inputs[2].aval.shape, independent, ordered


def scatter_step(b, eqn: Eqn, index: Index) -> OrderedStep:
    """Update element ``index`` of a scatter, combined into the result's buffer."""
    operand, _, updates = eqn.inputs
    positions = gather.indexed_positions(eqn, index)
    starts = _starts(b, eqn, positions.starts)
    where, offset = _place(b, operand.aval.shape, positions.affine, starts)
    guard = _in_bounds(b, starts) if positions.checked else None
    return OrderedStep(ix.linearize(where, operand.aval.shape), b.value(updates, index),
                       offset, gather.SCATTER_COMBINE[eqn.prim.name], guard)


def scan_step(b, eqn: Eqn, index: Index, name: str) -> OrderedStep:
    """Element ``index`` of a cumulative op (``name``: its accumulator's). Along the
    contiguous axis, a running accumulator; across rows (axes after the scanned one),
    the value stored for the previous element, so that a row of elements goes on at
    once (where it is what the accumulator would hold: the dtype accumulates itself)."""
    kind = access.SCAN_KIND[eqn.prim.name]
    operand, out = eqn.inputs[0], eqn.outputs[0]
    shape, dtype = operand.aval.shape, operand.aval.dtype
    axis, step = eqn.params["axis"], -1 if eqn.params["reverse"] else 1
    position = index[axis]
    if step < 0:
        index = (*index[:axis], ix.add(ix.const(shape[axis] - 1), ix.scale(position, -1)),
                 *index[axis + 1:])
    acc_dtype = accumulator_dtype(dtype) if kind in ("sum", "prod") else dtype
    where = ix.linearize(index, out.aval.shape)
    if acc_dtype == dtype and any(n > 1 for n in shape[axis + 1:]):
        before = (*index[:axis], ix.add(index[axis], ix.const(-step)), *index[axis + 1:])
        first = b.index_cond(position, 0, 0, 1)
        if first is None:  # always the first element (a scanned axis of extent 1)
            return OrderedStep(where, b.value(operand, index))
        previous = b.load(out, before, b.op("not", (first,), BOOL))
        combined = b.op(COMBINE[kind], (previous, b.value(operand, index)), dtype)
        return OrderedStep(where, b.op("select_n", (first, combined, b.value(operand, index)),
                                       dtype))
    update = b.convert(b.value(operand, index), acc_dtype)
    acc = Accumulator(name, kind, acc_dtype, dtype)
    running = b.make(("running", name), lambda: RunningValue(acc), free=ix.index_syms(index))
    return OrderedStep(where, b.convert(running, out.aval.dtype), acc=acc, update=update)

