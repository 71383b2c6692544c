"""From a schedule to lowered steps: kernel IR for loop groups, GEMM plans for library
calls, and the buffer traffic of each step (what memory planning needs)."""
from __future__ import annotations

from dataclasses import dataclass

from ember.codegen import indexing as ix
from ember.codegen.access import is_view, keeps_bytes
from ember.codegen.gemm import GemmPlan, operand_matrix, plan_gemm
from ember.codegen.gemm_activation import match_activation
from ember.codegen.kernel_ir import Buffer, Kernel, KernelInfo, Let, Load, Store
from ember.codegen.kernel_text import kernel_text
from ember.codegen.lower import LoopGroup, lower_loop_group
from ember.core import dtypes
from ember.ir.graph import Eqn, Literal, Var
from ember.passes.memory import Step
from ember.passes.schedule import Group, Schedule


@dataclass(frozen=True)
class AffineEpilogue:
    """A GEMM epilogue ``result = alpha * product + beta * addend + row_scale * row``
    (an SGD update ``w - lr * grad``, a residual ``x + y @ w``, a bias ``y @ w + b``
    broadcast along the rows), folded into the BLAS call: ``result`` starts as
    ``beta * addend + row_scale * row`` (each optional; nothing to do when the result
    holds the addend already and ``beta`` is 1) and the call computes
    ``C = alpha * A @ B + C`` into it, then applies ``activation`` (``relu(x @ w + b)``:
    ``codegen/gemm_activation.py``) to C as it stores it. ``keeps_product``: the plain
    product is needed too (a training step's backward reads it); the call then writes it
    and ``result`` from it."""

    result: Var
    alpha: float
    beta: float
    addend: Var | None
    row_scale: float = 0.0
    row: Var | None = None
    activation: str = "none"
    keeps_product: bool = False


@dataclass
class LoweredStep:
    group: Group
    kernel: Kernel | None = None  # the loop kernel (for a library call: its epilogue)
    bindings: dict[Var, Buffer] | None = None  # what each kernel parameter holds
    gemm: GemmPlan | None = None
    gemm_operands: tuple[Var, Var] | None = None
    call: Eqn | None = None  # the equation of a 'call' group (the target renders it)
    affine: AffineEpilogue | None = None  # the epilogue, when folded into the GEMM

    @property
    def host(self) -> bool:
        return self.group.kind == "host"

    @property
    def product(self) -> Var:
        """The buffer the GEMM writes."""
        if self.affine is not None and not self.affine.keeps_product:
            return self.affine.result
        return self.group.product

    def step(self) -> Step:
        group = self.group
        writes = group.writes()
        if self.affine is not None and not self.affine.keeps_product:  # (into the result)
            writes = [v for v in writes if v is not group.library.outputs[0]]
        return Step(reads=group.reads(), writes=writes, host=self.host,
                    inplace=self.in_place_pairs(), view_of=self.view_source())

    def view_source(self) -> Var | None:
        """The value whose bytes this step's one result is, in the same order (a loop
        kernel of reshapes alone, which only copies), or None."""
        group = self.group
        if self.kernel is None or self.gemm is not None or len(group.roots) != 1:
            return None
        reads = group.reads()
        if len(reads) != 1 or not all(keeps_bytes(e) for e in group.members.values()):
            return None
        source, result = reads[0], group.roots[0]
        same = source.aval.dtype == result.aval.dtype and source.aval.nbytes == result.aval.nbytes
        return source if same else None

    def in_place_pairs(self) -> list[tuple[Var, Var]]:
        """(output, input) pairs the kernel reads and writes at exactly the same positions,
        every read of the input coming before the write of the output (a multi-output
        kernel may store one output before it loads an operand of the next). A folded
        epilogue's result may take its addend's buffer (C = alpha AB + beta C in place)
        unless the addend is also an operand of the product."""
        if self.affine is not None:
            addend = self.affine.addend
            if addend is None or addend in self.gemm_operands or self.affine.keeps_product:
                return []
            return [(self.affine.result, addend)]
        if self.kernel is None:
            return []
        var_of = {buf: var for var, buf in self.bindings.items()}
        loads: dict[Buffer, set] = {}
        last_load: dict[Buffer, int] = {}  # program order of the last load of a buffer
        stores: dict[Buffer, list] = {}
        first_store: dict[Buffer, int] = {}
        for order, stmt in enumerate(self.kernel.walk()):
            if isinstance(stmt, Let) and isinstance(stmt.node, Load):
                where = _position(stmt.node.index, stmt.node.offset)
                loads.setdefault(stmt.node.buffer, set()).add(where)
                last_load[stmt.node.buffer] = order
            elif isinstance(stmt, Store) and not stmt.buffer.scratch:
                stores.setdefault(stmt.buffer, []).append(_position(stmt.index, stmt.offset))
                first_store.setdefault(stmt.buffer, order)
        pairs = []
        for out_buf, indices in stores.items():
            if len(indices) != 1:
                continue
            for in_buf, load_indices in loads.items():
                if (in_buf is not out_buf and load_indices == {indices[0]}
                        and last_load[in_buf] < first_store[out_buf]):
                    pairs.append((var_of[out_buf], var_of[in_buf]))
        return pairs


def _position(index, offset) -> tuple:
    """A load's or store's position, for comparing them (a data-dependent offset is
    equal only to itself)."""
    return (index, offset.id if offset is not None else None)


def lower_schedule(schedule: Schedule, *, threads: int, keep_rows: bool = True,
                   grid: bool = False, fold_affine: bool = False) -> list[LoweredStep]:
    """Kernel IR and GEMM plans for every group (``keep_rows``, ``grid``: see
    ``lower_loop_group``; ``fold_affine``: fold affine GEMM epilogues into the call,
    ``AffineEpilogue``); a 'call' group keeps its equation for the target to render."""
    producer = {v: eqn for eqn in schedule.graph.eqns for v in eqn.outputs}
    return [_lower_group(group, producer, threads=threads, keep_rows=keep_rows, grid=grid,
                         fold_affine=fold_affine) for group in schedule.groups]


def _lower_group(group: Group, producer: dict[Var, Eqn], *, threads: int,
                 keep_rows: bool, grid: bool, fold_affine: bool) -> LoweredStep:
    if group.kind in ("host", "call"):
        return LoweredStep(group, call=group.host if group.kind == "call" else None)
    step = LoweredStep(group)
    if group.library is not None:
        step.gemm, step.gemm_operands = _plan_library(group)
        if fold_affine and group.product_layout is None:
            step.affine = affine_epilogue(group, step.gemm)
    if group.members and group.product_layout is None and step.affine is None:
        loop = LoopGroup({id(e) for e in group.members.values()},
                         [(r, group.root_index[r]) for r in group.roots
                          if group.library is None or r is not group.library.outputs[0]],
                         group.syms, group.outer_rank, producer)
        if loop.roots:
            name = f"{group.name}_epilogue" if group.library is not None else group.name
            step.kernel, step.bindings = lower_loop_group(loop, name, threads,
                                                          keep_rows=keep_rows, grid=grid)
    return step


def affine_epilogue(group: Group, plan: GemmPlan) -> AffineEpilogue | None:
    """The library group's epilogue as ``alpha * product + beta * addend + row_scale *
    row``, possibly under an activation (scalar literals; an addend buffer of the
    product's shape; a row buffer broadcast along the product's last axis, its columns),
    or None when it is not one."""
    product = group.library.outputs[0]
    results = [root for root in group.roots if root is not product]
    if len(results) != 1 or not group.members or 0 in (plan.m, plan.n, plan.k):
        return None
    result = results[0]
    if result.aval.shape != product.aval.shape or result.aval.dtype != product.aval.dtype:
        return None
    reader = _EpilogueReader(group, plan.n)
    activation = match_activation(result, reader.producer)  # (the last step, if any)
    if activation is not None:
        reader.read |= activation.eqns
    found = reader.affine(result if activation is None else activation.operand)
    if found is None or len(reader.read) != len(group.members) or found.alpha == 0.0:
        return None
    by_kind: dict[str, tuple[Var, float]] = {}
    for (var, kind), scale in found.terms.items():
        if kind in by_kind or scale == 0.0:
            return None  # two addends (or two rows): not one BLAS call
        by_kind[kind] = (var, scale + 0.0)  # (no -0.0)
    addend, beta = by_kind.get("full", (None, 0.0))
    row_addend, row_scale = by_kind.get("row", (None, 0.0))
    return AffineEpilogue(result, found.alpha, beta, addend, row_scale, row_addend,
                          "none" if activation is None else activation.name,
                          keeps_product=len(group.roots) == 2)


class _EpilogueReader:
    """Reads a library group's members as an affine function of its product; ``read``
    collects the members it went through (all of them, for the epilogue to be one)."""

    def __init__(self, group: Group, columns: int) -> None:
        self.product = group.library.outputs[0]
        self.columns = columns
        self.producer = {v: e for e in group.members.values() for v in e.outputs}
        self.read: set[int] = set()

    def _member(self, atom) -> Eqn | None:
        eqn = self.producer.get(atom) if isinstance(atom, Var) else None
        if eqn is not None:
            self.read.add(id(eqn))
        return eqn

    def affine(self, atom) -> _Affine | None:
        product = self.product
        if atom is product:
            return _Affine(1.0, {})
        if isinstance(atom, Literal) or not isinstance(atom, Var):
            return None
        eqn = self._member(atom)
        if eqn is None:  # a buffer: the addend
            return _Affine(0.0, {(atom, "full"): 1.0}) if atom.aval == product.aval else None
        name, args = eqn.prim.name, eqn.inputs
        if name == "broadcast_in_dim":  # a row of n values down the product's rows
            if (tuple(eqn.params["broadcast_dimensions"]) == (product.aval.ndim - 1,)
                    and product.aval.shape[-1:] == (self.columns,)):
                return self.row(args[0])
            return None
        if name in ("neg", "mul"):
            return self.scaled(eqn, self.affine)
        if name in ("add", "sub"):
            left, right = self.affine(args[0]), self.affine(args[1])
            return _summed(left, _scaled(right, -1.0) if name == "sub" else right)
        return None

    def row(self, atom) -> _Affine | None:
        """A vector of the product's columns: a buffer, scaled (``-3 * b``)."""
        if not isinstance(atom, Var) or atom.aval.dtype != self.product.aval.dtype:
            return None
        eqn = self._member(atom)
        if eqn is None:
            return _Affine(0.0, {(atom, "row"): 1.0})
        return self.scaled(eqn, self.row)

    def scaled(self, eqn: Eqn, read) -> _Affine | None:
        """A neg's operand, or a mul's operand times a scalar factor, as ``read`` reads
        it, scaled (else None)."""
        if eqn.prim.name == "neg":
            return _scaled(read(eqn.inputs[0]), -1.0)
        if eqn.prim.name == "mul":
            for term, factor in (eqn.inputs, eqn.inputs[::-1]):
                value = self.scalar(factor)
                if value is not None:
                    return _scaled(read(term), value)
        return None

    def scalar(self, atom) -> float | None:
        """The value of a float scalar literal, or of one broadcast by a member."""
        eqn = self.producer.get(atom) if isinstance(atom, Var) else None
        if eqn is not None and eqn.prim.name == "broadcast_in_dim":
            value = self.scalar(eqn.inputs[0]) if eqn.inputs[0].aval.shape == () else None
            if value is not None:
                self.read.add(id(eqn))
            return value
        if (isinstance(atom, Literal) and atom.aval.shape == ()
                and dtypes.is_floating(atom.aval.dtype)):
            return float(atom.value)
        return None


@dataclass(frozen=True)
class _Affine:
    """``alpha * product + sum(scale * addend)``; an addend is (buffer, "full" or "row")."""

    alpha: float
    terms: dict


def _scaled(term: _Affine | None, factor: float) -> _Affine | None:
    if term is None:
        return None
    return _Affine(term.alpha * factor, {k: v * factor for k, v in term.terms.items()})


def _summed(left: _Affine | None, right: _Affine | None) -> _Affine | None:
    if left is None or right is None:
        return None
    terms = dict(left.terms)
    for k, v in right.terms.items():
        terms[k] = terms.get(k, 0.0) + v
    return _Affine(left.alpha + right.alpha, terms)


def _plan_library(group: Group) -> tuple[GemmPlan, tuple[Var, Var]]:
    eqn = group.library
    matrices = []
    for position, (base, index, syms) in enumerate(group.library_operands):
        matrix = operand_matrix(eqn, position, base.aval.shape, index, syms)
        if matrix is None:
            raise AssertionError(f"internal error: operand {position} of {group.name} does "
                                 f"not fit BLAS: {ix.linearize(index, base.aval.shape)!r}")
        matrices.append(matrix)
    bases = (group.library_operands[0][0], group.library_operands[1][0])
    # (a float32 buffer under a 16-bit operand: its cast is fused into the packing)
    casts = tuple(base.aval.dtype != operand.aval.dtype
                  for base, operand in zip(bases, eqn.inputs))
    out = group.product_layout
    if out is not None and out.transposed:  # the plan computes C^T = B^T A^T
        bases = bases[::-1]
    return plan_gemm(eqn, matrices[0], matrices[1], out, casts), bases


def steps_text(steps: list[LoweredStep]) -> str:
    """The kernel IR of every step, in order (host calls, library calls and their plans
    named where they run)."""
    parts = []
    for step in steps:
        group = step.group
        if step.host or step.call is not None:
            parts.append(f"{group.name}: {group.kind} call of {group.host.prim.name}")
        if step.gemm is not None:
            folded = f", epilogue folded: {step.affine}" if step.affine is not None else ""
            parts.append(f"{group.name}: {step.gemm}{folded}")
        if step.kernel is not None:
            parts.append(kernel_text(step.kernel))
    return "\n\n".join(parts)


def call_name(step: LoweredStep) -> str:
    """The C function of a native call step (a sort, a top_k)."""
    return f"{step.call.prim.name}_{step.group.id}"


def kernel_info(step: LoweredStep, source: str) -> KernelInfo:
    """What ``compiled.kernels`` shows of a lowered step (``source``: its code as shown)."""
    group = step.group
    if group.host is not None:  # a host call, or a library call of the module's own
        eqn = group.host
        lines = [eqn.source.short()] if eqn.source is not None else []
        if step.host:
            return KernelInfo(group.name, source, [eqn.prim.name], lines, "host",
                              group.why_boundary())
        why = f"{eqn.prim.name} runs as a call of its own (a merge sort of each row)"
        return KernelInfo(call_name(step), source, [eqn.prim.name], lines, "library", why)
    ops, lines = [], []
    if step.gemm is not None:
        ops.append("dot_general")
        eqn = group.library
        if eqn.source is not None:
            lines.append(eqn.source.short())
        if step.affine is not None:  # (computed by the call itself; as a kernel lists them)
            ops += [e.prim.name for e in reversed(group.members.values()) if not is_view(e)]
    if step.kernel is not None:
        ops += step.kernel.ops
        lines += [line for line in step.kernel.source_lines if line not in lines]
    kind = "library" if step.gemm is not None else "kernel"
    return KernelInfo(group.name, source, ops, lines, kind, group.why_boundary())
