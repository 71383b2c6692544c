"""Lowering a fused loop group to the kernel IR.

The group's roots are evaluated at their store indices; every member equation becomes
scalar nodes at the index its consumers read it (``ember.codegen.access``), hash-consed
so that a value needed twice at one position is computed once. Reductions become
accumulators filled by their own loops, in phases: a reduction whose operand needs an
earlier reduction's result runs in a later phase (softmax: max, then sum, then the
output loop), all inside one loop over the group's outer (row) axes.

Loop structure is chosen from the index expressions: adjacent axes that every access
walks contiguously are merged into one loop (so an elementwise kernel over a contiguous
array is a single flat loop), the outermost loop runs in parallel when there is enough
work, an innermost loop is marked for SIMD when all its accesses are unit-stride, and
values that do not depend on a loop are hoisted out of it.

Scatters and scans (``access.is_ordered``) get loops of their own after the group's
loops (``ember.codegen.dynamic`` builds what one iteration does): *independent* loops,
whose iterations touch distinct positions, may run in parallel; the others are
``sequential`` and keep their row-major order (a scan's running value; a scatter's
updates that may land on one position combine in the reference's order). A scatter's
result first receives its operand, stored by the group's loops, then a ``Barrier``.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.codegen import access, dynamic, gather, indexing as ix
from ember.codegen.indexing import Affine, Index, Sym
from ember.codegen.split_loops import split_at_index_conditions
from ember.codegen.kernel_ir import (AccFinish, AccInit, Accumulator, AccUpdate, AccValue, Barrier,
                                     Buffer, Const, IndexCond, IndexValue, Kernel, Let, Load, Loop,
                                     Node, Op, Scratch, Stmt, Store, walk)
from ember.ir.graph import Eqn, Literal, Var
from ember.ops.reductions import accumulator_dtype

MIN_PARALLEL_WORK = 1 << 18  # elements (times phases): below, waking a second thread costs more
# An element of a kernel with an expensive op (erf, exp, tanh: ``access.is_expensive``)
# counts as 1 + this many per such op: GELU's erf over 65536 elements took 85 µs alone.
EXPENSIVE_OP_WORK = 4
# A shorter innermost loop is left to the C compiler's own choice: `omp simd` on the 3
# taps of an im2col patch kernel made it 3-5x slower than scalar code (the patches of
# a 16x16x8x8 convolution by 3x3: 297 against 65 µs).
MIN_VECTOR_EXTENT = 8

@dataclass
class LoopGroup:
    """What a loop kernel computes: member equations, roots with their store indices."""

    members: set[int]  # id() of the member equations
    roots: list[tuple[Var, Index]]
    syms: tuple[Sym, ...]
    outer_rank: int | None
    producer: dict[Var, Eqn]


@dataclass(eq=False)
class _Reduction:
    acc: Accumulator
    body: Node
    syms: tuple[Sym, ...]  # its loop variables (after merging)
    position: Affine | None
    phase: int
    prim: str
    result: Node  # the AccValue node


@dataclass(eq=False)
class _OrderedNest:
    """A scatter's or a scan's own loops (their variables before loop planning): the
    ``independent`` ones may run in parallel, the ``sequential`` ones in order; ``step``
    is one iteration."""

    prim: str
    independent: tuple[Sym, ...]
    sequential: tuple[Sym, ...]
    buffer: Buffer
    step: dynamic.OrderedStep
    source: str


@dataclass
class _NodeInfo:
    free: frozenset[Sym]
    phase: int  # number of reduction phases that must finish before it can be computed


@dataclass
class _Scope:
    syms: frozenset[Sym]
    stmts: list[Stmt]
    bound: set[int] = field(default_factory=set)


def lower_loop_group(group: LoopGroup, name: str, threads: int, *, keep_rows: bool = True,
                     grid: bool = False) -> tuple[Kernel, dict[Var, Buffer]]:
    """The kernel IR of one loop group, and the value each kernel parameter holds.

    ``keep_rows``: let a row-wise kernel keep expensive row values in a ``Scratch``
    array between its loops (right for CPUs; a GPU target may prefer recomputing).
    ``grid``: the target spreads the outermost loops over many threads (a GPU), so
    an ordered nest always puts its independent loops outermost.
    """
    if any(sym.extent == 0 for sym in group.syms):  # nothing to compute or store
        return Kernel(name, [], []), {}
    first = _Builder(group, {})
    first.build()
    subst, loops = _plan_loops(group, first)
    second = _Builder(group, subst)
    second.build()
    columns = _column_split(second, loops, threads) if keep_rows and not grid else None
    if columns is not None:  # a third build, with the output loop split into blocks
        block, lane, split = columns
        subst = {raw: ix.substitute(form, split) for raw, form in subst.items()}
        loops = _LoopPlan([block], [], lanes=lane)
        second = _Builder(group, subst)
        second.build()
    kernel = _Emitter(second, loops, threads, keep_rows, grid).kernel(name)
    if not grid:  # (a GPU maps loops onto threads: pieces would each need a launch)
        kernel = split_at_index_conditions(kernel)
    return kernel, dict(second.params)


# --- building nodes -------------------------------------------------------------------

class _Builder:
    def __init__(self, group: LoopGroup, subst: dict[Sym, Affine]) -> None:
        self.group = group
        self.subst = subst
        # A reduction over the extents of the output loop's axes runs over the same
        # loop variables, so a value at one position is one node in both loops.
        rank = group.outer_rank
        self.inner = group.syms[rank:] if rank is not None and rank < len(group.syms) else ()
        self.params: dict[Var, Buffer] = {}
        self.nodes: dict[tuple, Node] = {}
        self.info: dict[int, _NodeInfo] = {}
        self.memo: dict[tuple[Var, Index], Node] = {}
        self.reductions: dict[tuple, _Reduction] = {}
        self.stores: list[tuple[Buffer, Affine, Node]] = []
        self.ordered: list[_OrderedNest] = []

    def build(self) -> None:
        for var, index in self.group.roots:
            index = tuple(ix.substitute(i, self.subst) for i in index)
            eqn = self.group.producer.get(var)
            if eqn is not None and id(eqn) in self.group.members and access.is_ordered(eqn):
                self.ordered.append(self._ordered(eqn))
                if eqn.prim.name in access.SCAN_KIND:
                    continue
                node = self.value(eqn.inputs[0], index)  # a scatter starts from its operand
            else:
                node = self.value(var, index)
            self.stores.append((self.buffer(var), ix.linearize(index, var.aval.shape), node))
            self.buffer(var).written = True

    def _ordered(self, eqn: Eqn) -> _OrderedNest:
        number = len(self.ordered)
        shape, independent, sequential = dynamic.ordered_axes(eqn)
        syms = tuple(Sym(f"u{number}_{k}", n) for k, n in enumerate(shape))
        index = tuple(ix.substitute(ix.var(s), self.subst) for s in syms)
        if eqn.prim.name in access.SCAN_KIND:
            step = dynamic.scan_step(self, eqn, index, f"scan{number}")
        else:
            step = dynamic.scatter_step(self, eqn, index)
        buffer = self.buffer(eqn.outputs[0])
        buffer.written = True
        return _OrderedNest(eqn.prim.name, tuple(syms[a] for a in independent),
                            tuple(syms[a] for a in sequential), buffer, step,
                            eqn.source.short() if eqn.source is not None else "")

    def buffer(self, var: Var) -> Buffer:
        buf = self.params.get(var)
        if buf is None:
            buf = Buffer(f"b{len(self.params)}", var.aval.dtype, var.aval.size,
                         var.aval.str_short())
            self.params[var] = buf
        return buf

    # hash-consing
    def make(self, key: tuple, factory, free: Iterable[Sym] = (), children=(),
             phase: int | None = None, source: str = "") -> Node:
        node = self.nodes.get(key)
        if node is not None:
            return node
        node = factory()
        node.id = len(self.nodes)
        node.source = source
        self.nodes[key] = node
        free_set = frozenset(free)
        child_phase = 0
        for child in children:
            child_info = self.info[child.id]
            free_set |= child_info.free
            child_phase = max(child_phase, child_info.phase)
        self.info[node.id] = _NodeInfo(free_set, child_phase if phase is None else phase)
        return node

    def const(self, value: Any, dtype: np.dtype) -> Node:
        value = np.asarray(value, dtype).item()
        return self.make(("const", repr(value), dtype.str), lambda: Const(value, dtype))

    def load(self, var: Var, index: Index, guard: Node | None = None,
             offset: Node | None = None, prim: str = "",
             shape: tuple[int, ...] | None = None) -> Node:
        """``var`` at ``index``, row-major in ``shape`` (where given: a reshape of
        ``var``'s, read in place) or in ``var``'s own."""
        if var.aval.size == 0:  # only read inside loops that never run
            return self.const(0, var.aval.dtype)
        buf = self.buffer(var)
        flat = ix.linearize(index, var.aval.shape if shape is None else shape)
        children = tuple(n for n in (guard, offset) if n is not None)
        key = ("load", buf.name, flat, *(n.id if n is not None else None for n in (guard, offset)))
        return self.make(key, lambda: Load(buf, flat, var.aval.dtype, guard, offset, prim),
                         free=ix.free_syms(flat), children=children)

    def index_value(self, form: Affine, dtype: np.dtype, source: str = "") -> Node:
        """The value of an index expression (iota)."""
        if not form.terms:
            return self.const(form.const, dtype)
        return self.make(("iota", form, dtype.str), lambda: IndexValue(form, dtype),
                         free=ix.free_syms(form), source=source)

    def index_cond(self, form: Affine, lo: int, hi: int, step: int) -> Node | None:
        """``lo <= form <= hi`` stepping by ``step``, or None when it always holds."""
        low, high = ix.bounds(form)
        if lo <= low and high <= hi and (step == 1 or low == high == lo):
            return None
        return self.make(("cond", form, lo, hi, step), lambda: IndexCond(form, lo, hi, step),
                         free=ix.free_syms(form))

    def all_of(self, conds: list[Node | None]) -> Node | None:
        """The conjunction of the conditions given (None: always true)."""
        present = [c for c in conds if c is not None]
        both = lambda a, b: self.op("and", (a, b), np.dtype(np.bool_))
        return functools.reduce(both, present) if present else None

    def op(self, name: str, args: tuple[Node, ...], dtype: np.dtype, param: Any = None,
           source: str = "") -> Node:
        key = ("op", name, tuple(a.id for a in args), dtype.str, _hashable(param))
        return self.make(key, lambda: Op(name, args, dtype, param), children=args,
                         source=source)

    def value(self, atom, index: Index) -> Node:
        if isinstance(atom, Literal):
            return self.const(atom.value, atom.aval.dtype)
        key = (atom, index)
        node = self.memo.get(key)
        if node is None:
            node = self._compute(atom, index)
            self.memo[key] = node
        return node

    def _compute(self, var: Var, index: Index) -> Node:
        eqn = self.group.producer.get(var)
        if eqn is None or id(eqn) not in self.group.members:
            return self.load(var, index)
        if access.is_view(eqn):
            return self.value(eqn.inputs[0], access.view_operand_index(eqn, index))
        if eqn.prim.name == "pad":
            return self._pad(eqn, index)
        if eqn.prim.name == "concatenate":
            return self._concatenate(eqn, index)
        if access.is_reduction(eqn):
            return self.reduction(eqn, index)
        if access.is_gather_like(eqn):
            return _GATHER_LIKE[eqn.prim.name](self, eqn, index)
        source = eqn.source.short() if eqn.source is not None else ""
        dtype = var.aval.dtype
        if eqn.prim.name == "iota":
            return self.index_value(index[eqn.params["dimension"]], dtype, source)
        args = tuple(self.value(atom, access.elementwise_operand_index(atom, index))
                     for atom in eqn.inputs)
        return self.op(eqn.prim.name, args, dtype, _op_param(eqn), source)

    def _pad(self, eqn: Eqn, index: Index) -> Node:
        """The operand where the (dilated, shifted) index lands on an element, else the
        padding value."""
        operand, fill = eqn.inputs
        conds, source = [], []
        for form, size, (lo, _, interior) in zip(index, operand.aval.shape,
                                                 eqn.params["padding_config"]):
            step = interior + 1
            shifted = ix.add(form, ix.const(-lo))
            conds.append(self.index_cond(shifted, 0, (size - 1) * step, step))
            lift = -(-max(lo, 0) // step) * step  # makes the division's argument >= 0
            source.append(shifted if step == 1 else ix.add(
                ix.floordiv(ix.add(shifted, ix.const(lift)), step), ix.const(-lift // step)))
        guard = self.all_of(conds)
        value = self.load(operand, tuple(source), guard)
        if guard is None:
            return value
        return self.op("select_n", (guard, self.value(fill, ()), value), value.dtype)

    def _concatenate(self, eqn: Eqn, index: Index) -> Node:
        axis = eqn.params["dimension"]
        pieces, start = [], 0
        for operand in eqn.inputs:
            size = operand.aval.shape[axis]
            shifted = ix.add(index[axis], ix.const(-start))
            guard = self.index_cond(shifted, 0, size - 1, 1)
            source = index[:axis] + (shifted,) + index[axis + 1:]
            if size:
                pieces.append((guard, self.load(operand, source, guard)))
            start += size
        if not pieces:  # an empty result: only read inside loops that never run
            return self.const(0, eqn.outputs[0].aval.dtype)
        guard, result = pieces[-1]
        for guard, value in reversed(pieces[:-1]):
            result = self.op("select_n", (guard, result, value), value.dtype) \
                if guard is not None else value
        return result

    def _reduction_loops(self, raw_syms: tuple[Sym, ...], indices: list[Index],
                         shared: tuple[Sym, ...] = ()) -> tuple[list[Index], Index,
                                                                 tuple[Sym, ...]]:
        """``indices`` with the reduction variables ``raw_syms`` replaced by their forms
        after loop merging (the forms of ``shared``, variables of the same extents, where
        given), those forms, and the loop variables they use."""
        forms = tuple(ix.substitute(ix.var(s), self.subst) for s in shared or raw_syms)
        loop_syms: dict[Sym, None] = {}
        for form in forms:  # each form uses one loop; runs keep the axes' order
            for sym in ix.free_syms(form):
                loop_syms.setdefault(sym)
        mapping = dict(zip(raw_syms, forms))
        return ([tuple(ix.substitute(i, mapping) for i in index) for index in indices], forms,
                tuple(loop_syms))

    def reduction(self, eqn: Eqn, index: Index) -> Node:
        out = eqn.outputs[0]
        # (reduce_sum: sum, argmax: argmax, a contraction sums)
        kind = "sum" if eqn.prim.name == "dot_general" else eqn.prim.name.removeprefix("reduce_")
        source = eqn.source.short() if eqn.source is not None else ""
        if eqn.prim.name == "dot_general":
            body, syms, acc_dtype = self._dot_body(eqn, index, source)
            position = None
            if not syms:  # nothing contracted: an outer product, no accumulator
                return self.convert(body, out.aval.dtype, source)
        else:
            operand_index, raw_syms = access.reduction_operand_index(eqn, index)
            extents = tuple(s.extent for s in raw_syms)
            shared = self.inner if extents == tuple(s.extent for s in self.inner) else ()
            (operand_index,), forms, syms = self._reduction_loops(raw_syms, [operand_index],
                                                                  shared)
            body = self.value(eqn.inputs[0], operand_index)
            dtype = eqn.inputs[0].aval.dtype
            acc_dtype = accumulator_dtype(dtype) if kind in ("sum", "prod") else dtype
            position = forms[0] if kind in ("argmax", "argmin") else None
            if kind in ("sum", "prod"):
                body = self.convert(body, acc_dtype, source)
        key = (kind, body.id, syms, acc_dtype.str)
        found = self.reductions.get(key)
        if found is None:
            index_dtype = out.aval.dtype if kind in ("argmax", "argmin") else None
            acc = Accumulator(f"acc{len(self.reductions)}", kind, acc_dtype,
                              eqn.inputs[0].aval.dtype, index_dtype)
            phase = self.info[body.id].phase
            # Computed once per position of the output index (the row), even where the
            # body does not depend on it: nodes using it stay inside that loop.
            free = (self.info[body.id].free - set(syms)) | ix.index_syms(index)
            result = self.make(("acc", acc.name), lambda: AccValue(acc), free=free,
                               phase=phase + 1, source=source)
            found = _Reduction(acc, body, syms, position, phase, eqn.prim.name, result)
            self.reductions[key] = found
        return self.convert(found.result, out.aval.dtype, source)

    def _dot_body(self, eqn: Eqn, index: Index, source: str):
        lhs_index, rhs_index, raw_syms = access.dot_operand_indices(eqn, index)
        (lhs_index, rhs_index), _, syms = self._reduction_loops(raw_syms,
                                                                [lhs_index, rhs_index])
        acc_dtype = accumulator_dtype(eqn.outputs[0].aval.dtype)
        lhs = self.convert(self.value(eqn.inputs[0], lhs_index), acc_dtype, source)
        rhs = self.convert(self.value(eqn.inputs[1], rhs_index), acc_dtype, source)
        return self.op("mul", (lhs, rhs), acc_dtype, None, source), syms, acc_dtype

    def convert(self, node: Node, dtype: np.dtype, source: str = "") -> Node:
        if node.dtype == dtype:
            return node
        return self.op("convert_element_type", (node,), dtype, dtype, source)


_GATHER_LIKE = {"gather": dynamic.gather_value, "dynamic_slice": dynamic.dynamic_slice_value,
                "dynamic_update_slice": dynamic.dynamic_update_value,
                **dict.fromkeys(gather.SCATTER_COMBINE, dynamic.scatter_value)}


def _op_param(eqn: Eqn) -> Any:
    params = eqn.params
    if "new_dtype" in params:
        return np.dtype(params["new_dtype"])
    if "y" in params:
        return int(params["y"])
    if "rounding_method" in params:
        return int(params["rounding_method"])
    return None


def _hashable(param: Any) -> Any:
    return param.str if isinstance(param, np.dtype) else param



# --- choosing loops -------------------------------------------------------------------

@dataclass
class _LoopPlan:
    outer: list[Sym]  # outer (row) loops, outermost first
    inner: list[Sym]  # loops of the final (output) phase
    # each ordered nest's loops: (independent, lanes, sequential)
    ordered: list[tuple[list[Sym], list[Sym], list[Sym]]] = field(default_factory=list)
    # column form (``_column_split``): the output columns of one block, inside ``outer``
    lanes: Sym | None = None
    # the innermost loop walks the reads, not the stores (``_reads_innermost``): its
    # strided stores may still run in SIMD lanes
    strided_stores: bool = False


def _accesses(builder: _Builder) -> list[Affine]:
    found = [flat for _, flat, _ in builder.stores]
    found += [nest.step.index for nest in builder.ordered]
    found += [node.index for node in builder.nodes.values()
              if isinstance(node, (Load, IndexCond, IndexValue))]
    return found


def _merge_runs(syms: list[Sym], forms: list[Affine]) -> list[list[Sym]]:
    """Split ``syms`` (outermost first) into runs that can each be one loop."""
    runs: list[list[Sym]] = []
    for sym in syms:
        if runs and _extends(runs[-1], sym, forms):
            runs[-1].append(sym)
        else:
            runs.append([sym])
    return runs


def _extends(run: list[Sym], sym: Sym, forms: list[Affine]) -> bool:
    """Whether every access walks ``run + [sym]`` as one contiguous row-major axis."""
    if sym.extent == 1 or all(member.extent == 1 for member in run):
        return all(_direct_only(f, s) for f in forms for s in (*run, sym))
    for form in forms:
        if not _direct_only(form, sym):
            return False
        direct = dict(form.terms)
        stride = direct.get(sym, 0) * sym.extent
        for member in reversed(run):
            if member.extent != 1 and (direct.get(member, 0) != stride
                                       or not _direct_only(form, member)):
                return False
            stride *= member.extent
    return True


def _substitution(runs: list[list[Sym]], prefix: str, subst: dict[Sym, Affine],
                  first: int = 0) -> list[Sym]:
    """One loop per run (named from ``first`` on); each original variable becomes a
    form of its run's loop."""
    loops = []
    for run in runs:
        total = int(np.prod([s.extent for s in run], dtype=np.int64))
        loop = Sym(f"{prefix}{first + len(loops)}", total)
        loops.append(loop)
        if total == 0:  # never runs; indices keep the loop variable so nothing is hoisted
            subst.update((sym, ix.var(loop)) for sym in run)
            continue
        stride = total
        for position, sym in enumerate(run):
            stride //= max(sym.extent, 1)
            form = ix.floordiv(ix.var(loop), stride) if stride > 1 else ix.var(loop)
            subst[sym] = form if position == 0 else ix.mod(form, sym.extent)
    return loops


def _plan_loops(group: LoopGroup, first: _Builder) -> tuple[dict[Sym, Affine], _LoopPlan]:
    forms = _accesses(first)
    rank = group.outer_rank if group.outer_rank is not None else 0
    subst: dict[Sym, Affine] = {}
    outer = _substitution(_merge_runs(list(group.syms[:rank]), forms), "o", subst)
    inner_runs, strided_stores = _merge_runs(list(group.syms[rank:]), forms), False
    if not first.reductions and not first.ordered:
        inner_runs, strided_stores = _reads_innermost(inner_runs, first)
    inner = _substitution(inner_runs, "i", subst)
    reduction_loops = 0  # (named apart: two reductions' loops may nest in C)
    for syms in dict.fromkeys(red.syms for red in first.reductions.values()):
        if not set(syms) <= set(group.syms):  # (shared with the output loops: done)
            reduction_loops += len(_substitution(_merge_runs(list(syms), forms), "k", subst,
                                                 reduction_loops))
    ordered = []
    for n, nest in enumerate(first.ordered):
        independent = _substitution(_merge_runs(list(nest.independent), forms), f"p{n}_", subst)
        sequential = _substitution(_merge_runs(list(nest.sequential), forms), f"q{n}_", subst)
        lanes = _split_lanes(independent, subst, nest.buffer.dtype.itemsize) \
            if nest.step.acc is None and sequential else []
        ordered.append((independent, lanes, sequential))
    return subst, _LoopPlan(outer, inner, ordered, strided_stores=strided_stores)


def _reads_innermost(runs: list[list[Sym]], builder: _Builder) -> tuple[list[list[Sym]], bool]:
    """For an elementwise kernel computing an expensive function (tanh, exp, erf) of an
    array it reads transposed (the store walks one axis contiguously, the reads
    another), the loop along which every read is contiguous goes innermost, and True:
    the function then runs in SIMD lanes on contiguous loads and the stores scatter,
    where the store's order left it scalar on strided loads (tanh's gradient over a
    convolution's output read as NCHW, 8x64x64: 4-7x faster)."""
    if len(runs) < 2 or not any(isinstance(node, Op) and access.is_expensive(node.op)
                                for node in builder.nodes.values()):
        return runs, False
    loads = [node for node in builder.nodes.values() if isinstance(node, Load)]
    if any(node.offset is not None for node in loads):
        return runs, False

    def walks_reads(run: list[Sym]) -> bool:
        sym = run[-1]
        steps = [ix.coefficient(node.index, sym) for node in loads]
        return (1 in steps and all(step in (0, 1) for step in steps)
                and all(_direct_only(node.index, sym) for node in loads))

    if walks_reads(runs[-1]):
        return runs, False
    for position, run in enumerate(runs[:-1]):
        if walks_reads(run):
            return [*runs[:position], *runs[position + 1:], run], True
    return runs, False


COLUMN_SCRATCH_BYTES = 1 << 14  # running values of one column block: stays in L1
MIN_COLUMNS = 8


def _column_split(builder: _Builder, plan: _LoopPlan,
                  threads: int) -> tuple[Sym, Sym, dict[Sym, Affine]] | None:
    """For a reduction down the columns of a row-major array (``x.sum(axis=0)``: one
    output loop walking the columns contiguously, one reduction loop walking the rows),
    the loops of the *column form*: blocks of output columns (``block``, in parallel)
    and the columns of one block (``lane``), as ``(block, lane, {output: block * width
    + lane})``; None when the group is not such a reduction.

    The plain form walks each column down the rows, one cache line per row, at a large
    stride; the column form keeps a block's running values in scratch rows and streams
    the input row after row along the block, contiguous and vectorized."""
    if builder.ordered or len(plan.outer) != 1 or plan.inner or not builder.reductions:
        return None
    reductions = list(builder.reductions.values())
    rows = reductions[0].syms
    if (len(rows) != 1 or any(r.syms != rows or r.phase or r.acc.kind not in dynamic.COMBINE
                              for r in reductions)):
        return None
    column, row = plan.outer[0], rows[0]
    strided = False
    for node in builder.nodes.values():
        if not isinstance(node, (Load, IndexCond, IndexValue)) or column not in ix.free_syms(
                node.index):
            continue
        if (ix.coefficient(node.index, column) != 1 or not _direct_only(node.index, column)
                or getattr(node, "offset", None) is not None):
            return None
        strided |= isinstance(node, Load) and ix.coefficient(node.index, row) not in (0, 1)
    if not strided or any(ix.free_syms(flat) - {column} for _, flat, _ in builder.stores):
        return None
    per_column = sum(r.acc.dtype.itemsize for r in reductions)
    width = _column_width(column.extent, COLUMN_SCRATCH_BYTES // per_column, threads)
    if width is None:
        return None
    block, lane = Sym("ob", column.extent // width), Sym("oc", width)
    return block, lane, {column: ix.add(ix.scale(ix.var(block), width), ix.var(lane))}


def _column_width(columns: int, most: int, threads: int) -> int | None:
    """The widest block of at most ``most`` columns that divides ``columns`` into a
    number of blocks shared evenly by the threads (else into any number of blocks);
    None below ``MIN_COLUMNS``."""
    for spread in (threads, 1):
        for blocks in range(max(-(-columns // most), 1), columns // MIN_COLUMNS + 1):
            if blocks % spread == 0 and columns % blocks == 0:
                return columns // blocks
    return None


LANE_BYTES = (128, 64)  # widths tried for a scatter's lanes: whole cache lines


def _split_lanes(independent: list[Sym], subst: dict[Sym, Affine], itemsize: int) -> list[Sym]:
    """Split a scatter's innermost independent loop into chunks (which stay independent)
    of a few cache lines (the *lanes*, returned), so that a thread can take a chunk and
    walk the ordered updates with a contiguous, vectorized loop over its lanes."""
    if not independent:
        return []
    last = independent[-1]
    width = next((w // itemsize for w in LANE_BYTES
                  if w >= itemsize and last.extent % (w // itemsize) == 0
                  and last.extent > w // itemsize), None)
    if width is None:
        return []
    chunk, lane = Sym(f"{last.name}c", last.extent // width), Sym(f"{last.name}l", width)
    split = {last: ix.add(ix.scale(ix.var(chunk), width), ix.var(lane))}
    for raw, form in subst.items():
        if last in ix.free_syms(form):
            subst[raw] = ix.substitute(form, split)
    independent[-1] = chunk
    return [lane]


# --- emitting statements --------------------------------------------------------------

MAX_STASH = 1 << 13  # elements of one row kept on the stack


class _Emitter:
    def __init__(self, builder: _Builder, plan: _LoopPlan, threads: int,
                 keep_rows: bool, grid: bool = False) -> None:
        self.b = builder
        self.plan = plan
        self.threads = threads
        self.grid = grid
        self.scopes: list[_Scope] = []
        self.ops: list[str] = []
        self.lines: dict[str, None] = {}
        self.stash = self._stash_buffers() if keep_rows else {}
        self.stashed: set[int] = set()  # stored by a reduction loop: reuse in the output loop
        self.reusing = False

    def kernel(self, name: str) -> Kernel:
        top = _Scope(frozenset(), [])
        self.scopes = [top]
        phases = self._phases if self.plan.lanes is None else self._column_phases
        top.stmts.extend(self._nest(self.plan.outer, phases, self._parallel_rows()))
        for nest, loops in zip(self.b.ordered, self.plan.ordered):
            if top.stmts:
                top.stmts.append(Barrier())
                if self.grid:  # each part is a kernel of its own: nothing carries over
                    top.bound = set()
            top.stmts.extend(self._ordered_nest(nest, *loops))
        params = list(self.b.params.values())
        return Kernel(name, params, top.stmts, self.ops, list(self.lines))

    @functools.cached_property
    def _work(self) -> int:
        """Elements visited (times phases), weighted by the expensive ops computed (the
        plan and the ops are fixed once the emitter exists: computed once)."""
        rows = self.plan.outer + ([self.plan.lanes] if self.plan.lanes else [])
        total = int(np.prod([s.extent for s in rows + self.plan.inner], dtype=np.int64))
        for syms in {r.syms for r in self.b.reductions.values()}:
            total += int(np.prod([s.extent for s in rows + list(syms)], dtype=np.int64))
        expensive = sum(1 for node in self.b.nodes.values()
                        if isinstance(node, Op) and access.is_expensive(node.op))
        return total * (1 + EXPENSIVE_OP_WORK * expensive)

    def _parallel_rows(self) -> bool:
        """Whether the outer loops run in parallel: enough work, and rows enough for the
        threads (the column form: blocks of columns the threads share evenly)."""
        if self.threads < 2 or not self.plan.outer or self._work < MIN_PARALLEL_WORK:
            return False
        if self.plan.lanes is not None:
            blocks = self.plan.outer[0].extent
            return blocks >= self.threads and blocks % self.threads == 0
        return int(np.prod([s.extent for s in self.plan.outer], dtype=np.int64)) >= 4 * self.threads

    def _parallel_inner(self) -> bool:
        return (self.threads > 1 and not self._parallel_rows()
                and self._work >= MIN_PARALLEL_WORK)

    # loops
    def _nest(self, syms: list[Sym], fill, parallel: bool, accs: list[Accumulator] = (),
              ordered: bool = False):
        """Statements of a loop nest over ``syms`` whose innermost body ``fill`` emits
        (``ordered``: sequential loops)."""
        if not syms:
            fill()
            return []
        scope = _Scope(self.scopes[-1].syms | {syms[0]}, [])
        self.scopes.append(scope)
        inner = self._nest(syms[1:], fill, False, accs, ordered)
        scope.stmts.extend(inner)
        self.scopes.pop()
        loop = Loop(syms[0], scope.stmts, parallel=parallel, accumulators=list(accs),
                    sequential=ordered)
        if len(syms) == 1 and not ordered:
            loop.vector = syms[0].extent >= MIN_VECTOR_EXTENT and self._vectorizable(loop)
        return [loop]

    def _vectorizable(self, loop: Loop) -> bool:
        for stmt in walk(loop.body):
            index, offset = None, None
            if isinstance(stmt, Let) and isinstance(stmt.node, (Load, IndexValue, IndexCond)):
                index = stmt.node.index
                offset = getattr(stmt.node, "offset", None)
            elif isinstance(stmt, Store):
                index, offset = stmt.index, stmt.offset
                if self.plan.strided_stores and offset is None and _direct_only(index, loop.sym):
                    continue
            elif (isinstance(stmt, AccUpdate) and stmt.acc.kind in ("argmax", "argmin")) or (
                    isinstance(stmt, Loop) and stmt.sequential):
                return False
            if offset is not None and loop.sym in self._free(offset):
                return False  # a gather or scatter along the loop: not unit-stride
            if index is not None and (ix.coefficient(index, loop.sym) not in (0, 1)
                                      or not _direct_only(index, loop.sym)):
                return False
        return True

    # scatters and scans
    def _ordered_nest(self, nest: _OrderedNest, independent: list[Sym], lanes: list[Sym],
                      sequential: list[Sym]) -> list[Stmt]:
        """The loops of a scatter or scan: independent loops outermost where they run in
        parallel (a scatter keeps its lanes innermost: a thread walks the updates in
        order along a contiguous chunk) or carry a scan's accumulator, else innermost,
        where they may be vectorized (a scatter of rows: each row in turn, along it)."""
        step = nest.step

        def body() -> None:
            scope = self.scopes[-1]
            if step.acc is not None:
                self._bind(step.update)
                scope.stmts.append(AccUpdate(step.acc, step.update))
            for node in (step.value, step.offset, step.guard):
                if node is not None:
                    self._bind(node)
            scope.stmts.append(Store(nest.buffer, step.index, step.value, step.offset,
                                     step.combine, step.guard))

        def across(loops: list[Sym]):
            return lambda: self.scopes[-1].stmts.extend(self._nest(loops, body, False))

        def in_order(inner: list[Sym]):
            def fill() -> None:
                if step.acc is not None:
                    self.scopes[-1].stmts.append(AccInit(step.acc))
                self.scopes[-1].stmts.extend(
                    self._nest(sequential, across(inner), False, ordered=True))
            return fill

        spread = int(np.prod([s.extent for s in independent], dtype=np.int64))
        work = spread * int(np.prod([s.extent for s in sequential + lanes], dtype=np.int64))
        parallel = (self.threads > 1 and spread >= 4 * self.threads
                    and work >= MIN_PARALLEL_WORK)
        self._record(nest.prim, nest.source)
        if self.grid or step.acc is not None:
            return self._nest(independent + lanes, in_order([]), parallel)
        if parallel:
            return self._nest(independent, in_order(lanes), parallel)
        return self._nest(sequential, across(independent + lanes), False, ordered=True)

    # keeping expensive row values between a reduction loop and the output loop
    def _stash_buffers(self) -> dict[int, Buffer]:
        """Scratch rows for expensive values computed by a reduction loop and needed again,
        at the same positions, by the output loop (softmax's exponentials)."""
        if len(self.plan.inner) != 1 or self.plan.inner[0].extent > MAX_STASH:
            return {}
        loop = self.plan.inner[0]
        phase_nodes = self._needed([r.body for r in self.b.reductions.values()], loop)
        final_nodes = self._needed([n for _, _, n in self.b.stores], loop)
        stash = {}
        for node_id in phase_nodes & final_nodes:
            node = self._node[node_id]
            if isinstance(node, Op) and access.is_expensive(node.op):
                stash[node_id] = Buffer(f"s{len(stash)}", node.dtype, loop.extent,
                                        scratch=True)
        return stash

    def _needed(self, roots: list[Node], loop: Sym) -> set[int]:
        """Nodes computed inside ``loop`` to evaluate ``roots`` (which depend on it)."""
        self._node = {n.id: n for n in self.b.nodes.values()}
        found: set[int] = set()
        stack = [n for n in roots if loop in self._free(n)]
        while stack:
            node = stack.pop()
            if node.id in found or loop not in self._free(node):
                continue
            found.add(node.id)
            stack.extend(node.operands())
        return found

    def _keep(self) -> None:
        """Store the stash values this reduction loop has just computed."""
        scope = self.scopes[-1]
        for node_id, buffer in self.stash.items():
            if node_id in scope.bound and node_id not in self.stashed:
                scope.stmts.append(Store(buffer, ix.var(self.plan.inner[0]),
                                         self._node[node_id]))
                self.stashed.add(node_id)

    # phases
    def _phases(self) -> None:
        scope = self.scopes[-1]
        scope.stmts.extend(Scratch(buffer) for buffer in self.stash.values())
        reductions = self.b.reductions.values()
        for phase in sorted({r.phase for r in reductions}):
            batch = [r for r in reductions if r.phase == phase]
            for syms in dict.fromkeys(r.syms for r in batch):
                self._reduction_loop([r for r in batch if r.syms == syms])
        inner = []  # the stores that need the output loop
        for buf, flat, node in self.b.stores:
            if self._free(node) | ix.free_syms(flat) <= scope.syms:
                self._bind(node)
                scope.stmts.append(Store(buf, flat, node))
            else:
                inner.append((buf, flat, node))
        if inner:
            def fill() -> None:
                for buf, flat, node in inner:
                    self._bind(node)
                    self.scopes[-1].stmts.append(Store(buf, flat, node))

            self.reusing = True
            scope.stmts.extend(self._nest(self.plan.inner, fill, self._parallel_inner()))
            self.reusing = False

    def _column_phases(self) -> None:
        """(Column form) one block of columns: the running values of its reductions in
        scratch rows, updated along the block row after row, then the block's outputs."""
        lane = ix.var(self.plan.lanes)
        partial = {red: Buffer(f"c{number}", red.acc.dtype, self.plan.lanes.extent, scratch=True)
                   for number, red in enumerate(self.b.reductions.values())}
        self.scopes[-1].stmts.extend(Scratch(buffer) for buffer in partial.values())

        def start() -> None:
            for red, buffer in partial.items():
                identity = self.b.const(red.acc.identity(), red.acc.dtype)
                self.scopes[-1].stmts.append(Store(buffer, lane, identity))

        def update() -> None:
            for red, buffer in partial.items():
                self._bind(red.body)
                old = self.b.make(("partial", buffer.name),
                                  lambda: Load(buffer, lane, red.acc.dtype),
                                  free=(self.plan.lanes,))
                new = self.b.op(dynamic.COMBINE[red.acc.kind], (old, red.body), red.acc.dtype)
                self.scopes[-1].stmts += [Let(old), Let(new), Store(buffer, lane, new)]

        def finish() -> None:
            scope = self.scopes[-1]
            for red, buffer in partial.items():
                self._finish(red, Load(buffer, lane, red.acc.dtype))
            for buffer, flat, node in self.b.stores:
                self._bind(node)
                scope.stmts.append(Store(buffer, flat, node))

        rows = list(next(iter(partial)).syms)
        for loops, fill in (([], start), (rows, update), ([], finish)):
            self.scopes[-1].stmts.extend(self._nest([*loops, self.plan.lanes], fill, False))

    def _reduction_loop(self, batch: list[_Reduction]) -> None:
        scope = self.scopes[-1]
        loops = list(batch[0].syms)
        for red in batch:
            scope.stmts.append(AccInit(red.acc))

        def fill() -> None:
            for red in batch:
                self._bind(red.body)
                self.scopes[-1].stmts.append(AccUpdate(red.acc, red.body, red.position))
            self._keep()

        accs = [r.acc for r in batch]
        parallel = self._parallel_inner() and not any(
            a.kind in ("argmax", "argmin") for a in accs)
        scope.stmts.extend(self._nest(loops, fill, parallel, accs))
        for red in batch:
            scope.stmts.append(AccFinish(red.acc))
            self._finish(red)

    def _finish(self, red: _Reduction, value: Node | None = None) -> None:
        """Bind a finished reduction's result (``value``: where it is read from)."""
        scope = self.scopes[-1]
        scope.stmts.append(Let(red.result, value))
        scope.bound.add(red.result.id)
        self._record(red.prim, red.result.source)

    def _record(self, op: str, source: str) -> None:
        """Note an op the kernel computes, and the user's line behind it."""
        self.ops.append(op)
        if source:
            self.lines.setdefault(source)

    # values
    def _free(self, node: Node) -> frozenset[Sym]:
        return self.b.info[node.id].free

    def _bind(self, node: Node) -> None:
        """Make ``node`` available in the current scope, computing it in the outermost
        open scope that has its loop variables."""
        if isinstance(node, Const) or any(node.id in s.bound for s in self.scopes):
            return
        if self.reusing and node.id in self.stashed:
            kept = Load(self.stash[node.id], ix.var(self.plan.inner[0]), node.dtype)
            self.scopes[-1].stmts.append(Let(node, kept))
            self.scopes[-1].bound.add(node.id)
            return
        for child in node.operands():
            self._bind(child)
        free = self._free(node)
        target = next(s for s in self.scopes if free <= s.syms)
        target.stmts.append(Let(node))
        target.bound.add(node.id)
        if isinstance(node, Load) and node.prim:
            self.ops.append(node.prim)
        if isinstance(node, Op):
            self._record(node.op, node.source)


def _direct_only(form: Affine, sym: Sym) -> bool:
    """True when ``sym`` appears only as a plain term, not inside a division or modulo."""
    for atom, _ in form.terms:
        if not isinstance(atom, Sym) and sym in ix.free_syms(atom.arg):
            return False
    return True
