"""From a schedule to lowered steps: kernel IR for loop groups, GEMM plans for library
calls, and the buffer traffic of each step (what memory planning needs)."""
from __future__ import annotations

from dataclasses import dataclass

from ember.backends.base import KernelInfo
from ember.codegen import indexing as ix
from ember.codegen.gemm import GemmPlan, operand_matrix, plan_gemm
from ember.codegen.kernel_ir import Buffer, Kernel, Let, Load, Store
from ember.codegen.lower import LoopGroup, lower_loop_group
from ember.ir.graph import Eqn, Var
from ember.passes.memory import Step
from ember.passes.schedule import Group, Schedule


@dataclass
class LoweredStep:
    group: Group
    kernel: Kernel | None = None  # the loop kernel (for a library call: its epilogue)
    bindings: dict[Var, Buffer] | None = None  # what each kernel parameter holds
    gemm: GemmPlan | None = None
    gemm_operands: tuple[Var, Var] | None = None
    call: Eqn | None = None  # the equation of a 'call' group (the target renders it)

    @property
    def host(self) -> bool:
        return self.group.kind == "host"

    def step(self) -> Step:
        group = self.group
        return Step(reads=group.reads(), writes=group.writes(), host=self.host,
                    inplace=self.in_place_pairs())

    def in_place_pairs(self) -> list[tuple[Var, Var]]:
        """(output, input) pairs the kernel reads and writes at exactly the same positions,
        every read of the input coming before the write of the output (a multi-output
        kernel may store one output before it loads an operand of the next)."""
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


def lower_schedule(schedule: Schedule, threads: int, keep_rows: bool = True,
                   grid: bool = False) -> list[LoweredStep]:
    """Kernel IR and GEMM plans for every group (``keep_rows``, ``grid``: see
    ``lower_loop_group``); a 'call' group keeps its equation for the target to render."""
    producer = {v: eqn for eqn in schedule.graph.eqns for v in eqn.outputs}
    return [_lower_group(group, producer, threads, keep_rows, grid)
            for group in schedule.groups]


def _lower_group(group: Group, producer: dict[Var, Eqn], threads: int,
                 keep_rows: bool, grid: bool) -> LoweredStep:
    if group.kind in ("host", "call"):
        return LoweredStep(group, call=group.host if group.kind == "call" else None)
    step = LoweredStep(group)
    if group.library is not None:
        step.gemm, step.gemm_operands = _plan_library(group)
    if group.members and group.product_layout is None:
        loop = LoopGroup({id(e) for e in group.members.values()},
                         [(r, group.root_index[r]) for r in group.roots
                          if group.library is None or r is not group.library.outputs[0]],
                         group.syms, group.outer_rank, producer)
        if loop.roots:
            name = f"{group.name}_epilogue" if group.library is not None else group.name
            step.kernel, step.bindings = lower_loop_group(loop, name, threads, keep_rows, grid)
    return step


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
    out = group.product_layout
    if out is not None and out.transposed:  # the plan computes C^T = B^T A^T
        bases = bases[::-1]
    return plan_gemm(eqn, matrices[0], matrices[1], out), bases


def call_name(step: LoweredStep) -> str:
    """The C function of a native call step (a sort, a top_k)."""
    return f"{step.call.prim.name}_{step.group.id}"


def kernel_info(step: LoweredStep, source: str) -> KernelInfo:
    """What ``compiled.kernels`` shows of a lowered step (``source``: its code as shown)."""
    group = step.group
    if step.host:
        eqn = group.host
        lines = [eqn.source.short()] if eqn.source is not None else []
        return KernelInfo(group.name, source, [eqn.prim.name], lines, "host",
                          group.why_boundary())
    ops, lines = [], []
    if step.call is not None:  # a library call of the module's own
        eqn = step.call
        lines = [eqn.source.short()] if eqn.source is not None else []
        why = f"{eqn.prim.name} runs as a call of its own (a merge sort of each row)"
        return KernelInfo(call_name(step), source, [eqn.prim.name], lines, "library", why)
    if step.gemm is not None:
        ops.append("dot_general")
        eqn = group.library
        if eqn.source is not None:
            lines.append(eqn.source.short())
    if step.kernel is not None:
        ops += step.kernel.ops
        lines += [line for line in step.kernel.source_lines if line not in lines]
    kind = "library" if step.gemm is not None else "kernel"
    return KernelInfo(group.name, source, ops, lines, kind, group.why_boundary())
