"""What the GPU renderers (CUDA C, OpenCL C) share: the kernel IR's loops mapped onto a
grid of thread blocks (OpenCL: work-groups), block-level reductions, a tiled GEMM.

Lowering (``ember.codegen.lower``) produces two shapes of kernel, and each gets one
mapping, decided here from the kernel IR alone:

- *elementwise* kernels (no reduction loop): the loop nest becomes one grid-stride loop
  over all its iterations. Consecutive threads take consecutive iterations of the
  innermost loop, which lowering made the contiguous one: loads and stores coalesce.
- *row* kernels (reductions: sums, softmax, layernorm): one block per row (the loops
  around the reductions, block-strided), the loops inside a row spread over the block's
  threads, thread-strided (coalesced along a contiguous row). After each reduction loop
  the threads' partial accumulators are combined by a block-level tree reduction in
  shared memory (CUDA: warp shuffles first), which leaves the result in every thread,
  so the next phase (softmax: the sum after the max, then the output) goes on at once.
  A store outside the spread loops is done by the block's first thread. (A kernel with
  reductions but no row loop, e.g. a full sum, is one row: a single block.)

A perfect nest of loops (a loop whose body is one loop) is collapsed into one flat loop
before it is mapped; a sequential loop (a scan, a scatter over repeated positions) is
never spread: each thread runs it whole. A kernel with barriers (a scatter copies its
operand first) is launched as one kernel per part (``kernel_ir.split_at_barriers``).
Everything else (sequential loops, values, accumulator updates) is rendered by the C
renderer this class derives from: a target differs from C by tables
(``builtins``, qualifiers, ``prelude``) and a few hooks, not by its own lowering.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ember.codegen import indexing as ix
from ember.codegen.c import CRenderer
from ember.codegen.gemm import GemmPlan, Matrix
from ember.codegen.render import C_OPERATORS
from ember.codegen.kernel_ir import (Accumulator, AccUpdate, Buffer, Kernel, Load, Loop, Node,
                                     Op, Stmt, Store, walk)

THREAD = "tid"  # the variable holding the thread's index in its block
BLOCK = 256  # threads per block of every generated loop kernel (a multiple of 32)
GEMM_TILE = 16  # GEMM kernels: TILE x TILE threads,
GEMM_REGS = 4  # each computing REGS x REGS outputs of a (TILE * REGS)^2 tile of C
_INT32_LIMIT = 2 ** 31 - 1


@dataclass(frozen=True)
class LaunchShape:
    """Blocks per grid and threads per block, (x, y, z)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]


@dataclass
class _Mapping:
    """How one kernel's loops map onto the grid."""

    rows: bool  # a row kernel (block per row) rather than an elementwise one
    roles: dict[int, str] = field(default_factory=dict)  # id(loop) -> 'grid'|'block'|'thread'
    guarded: set[int] = field(default_factory=set)  # id(store) done by one thread only
    iterations: int = 1  # grid kernels: iterations of the grid loop; row kernels: rows
    # accumulators updated by threads of a block in turn: combined after their loop
    accumulators: list[Accumulator] = field(default_factory=list)


class GpuRenderer(CRenderer):
    """Kernel IR -> a GPU C dialect. Subclasses fill in the tables below."""

    # builtins: 'thread' (index in the block), 'block' (index in the grid), 'blocks'
    # (blocks in the grid) -> an int expression, ``{axis}`` / ``{letter}`` the dimension
    # (0, 1, 2 / x, y, z); 'barrier' -> the statement that synchronizes a block.
    builtins: dict[str, str] = {}
    # what comes before a kernel's name: {x}, {y}, {z} the block shape, {threads} its size
    kernel_prefix = ""
    shared_qualifier = ""  # of a block-shared array
    prelude = ""
    max_blocks = 65535  # grid-stride and block-stride loops never launch more blocks
    warp_size: int | None = None  # when set: shuffle-based reductions within a warp

    def __init__(self) -> None:
        super().__init__(threads=1, vector_math=())

    # --- math -------------------------------------------------------------------------
    def math_function(self, name: str, dtype: np.dtype) -> str:
        """A function the C tables call: the target's own, or one of the prelude's
        ``ember_<name>[f]`` helpers (``_HELPERS``) for those it lacks."""
        if name in _HELPERS:
            return f"ember_{name}" if dtype.name == "float64" else f"ember_{name}f"
        return self.library_function(name, dtype)

    def library_function(self, name: str, dtype: np.dtype) -> str:
        raise NotImplementedError

    def helper_functions(self, qualifier: str, fp64: bool = True) -> str:
        """Definitions of the ``_HELPERS`` in this dialect (for the prelude)."""
        parts = []
        for dtype in [np.dtype(np.float32), *([np.dtype(np.float64)] if fp64 else [])]:
            ctype = self.compute_types[dtype.name]
            for name, body in _HELPERS.items():
                fields = {"T": ctype, "one": self.float_literal(1.0, dtype),
                          "zero": self.float_literal(0.0, dtype),
                          **{f"f_{n}": self.library_function(n, dtype) for n in ("exp", "fabs")}}
                parts.append(f"{qualifier} {ctype} {self.math_function(name, dtype)}({ctype} x) "
                             f"{{ {body.format(**fields)} }}")
        return "\n".join(parts) + "\n"

    # --- builtins ---------------------------------------------------------------------
    def builtin(self, name: str, axis: int = 0) -> str:
        return self.builtins[name].format(axis=axis, letter="xyz"[axis])

    def barrier(self) -> str:
        return self.builtins["barrier"]

    # --- a whole kernel ------------------------------------------------------------------
    def render_body(self, kernel: Kernel, aliases: Mapping[Buffer, Buffer],
                    shifts: Mapping[Buffer, int] | None = None) -> str:
        self.mapping = _map_loops(kernel)
        self.index_type = "int" if _fits_int32(kernel, self.max_blocks) else "int64_t"
        header, _, rest = super().render_body(kernel, aliases, shifts).partition("\n")
        shared = [line for acc in self.mapping.accumulators
                  for line in self.combine_scratch(acc)]
        shared.append(f"const int {THREAD} = {self.builtin('thread')};")
        return "\n".join([header, *(self.indent_unit + line for line in shared), rest])

    def launch_shape(self, kernel: Kernel) -> LaunchShape:
        """How to launch ``kernel`` (rendered or not: the mapping only reads the IR)."""
        mapping = _map_loops(kernel)
        blocks = mapping.iterations if mapping.rows else -(-mapping.iterations // BLOCK)
        return LaunchShape((max(1, min(blocks, self.max_blocks)), 1, 1), (BLOCK, 1, 1))

    def kernel_header(self, kernel: Kernel, params: list[tuple[Buffer, bool]]) -> str:
        return f"{self.prefix((BLOCK, 1, 1))} {kernel.name}({self.parameters(params)})"

    def prefix(self, block: tuple[int, int, int]) -> str:
        x, y, z = block
        return self.kernel_prefix.format(x=x, y=y, z=z, threads=x * y * z)

    # --- loops -----------------------------------------------------------------------
    def loop_header(self, loop: Loop) -> list[str]:
        sym = loop.sym
        return [f"for ({self.index_type} {sym.name} = 0; {sym.name} < {sym.extent}; "
                f"{sym.name}++) {{"]

    def loop_lines(self, loop: Loop, depth: int) -> list[str]:
        role = self.mapping.roles.get(id(loop))
        if role is None:
            return super().loop_lines(loop, depth)
        nest = _perfect_nest(loop)
        start, step = self._strides(role)
        pad = self.indent_unit * depth
        inner = pad + self.indent_unit
        it = self.index_type
        name = loop.sym.name if len(nest) == 1 else f"f_{loop.sym.name}"  # (a flat nest)
        total = math.prod(n.sym.extent for n in nest)
        lines = [f"{pad}for ({it} {name} = {start}; {name} < {total}; {name} += {step}) {{"]
        if len(nest) > 1:
            stride = total
            for position, member in enumerate(nest):
                stride //= max(member.sym.extent, 1)
                value = f"{name} / {stride}" if stride > 1 else name
                if position > 0:
                    value = f"({value}) % {member.sym.extent}"
                lines.append(f"{inner}const {it} {member.sym.name} = {value};")
        return lines + self.block(nest[-1].body, depth + 1) + [pad + "}"]

    def _strides(self, role: str) -> tuple[str, str]:
        it = self.index_type
        thread, block = THREAD, self.builtin("block")
        blocks = f"({it})({self.builtin('blocks')})"
        if role == "grid":
            return f"({it})({block}) * {BLOCK} + {thread}", f"{blocks} * {BLOCK}"
        if role == "block":
            return f"({it})({block})", blocks
        return thread, str(BLOCK)

    # --- statements --------------------------------------------------------------------
    def statement(self, stmt: Stmt) -> list[str]:
        if isinstance(stmt, AccUpdate) and _is_float_product_sum(stmt):
            # one rounding, as the C backend's contracted multiply-adds (dot products)
            a, b = (self.ref(arg) for arg in stmt.value.args)
            fma = self.library_function("fma", stmt.acc.dtype)
            return [f"{stmt.acc.name} = {fma}({a}, {b}, {stmt.acc.name});"]
        lines = super().statement(stmt)
        if id(stmt) in self.mapping.guarded:
            return [f"if ({self.first_thread()}) {{ {' '.join(lines)} }}"]
        return lines

    # --- scratch rows: values a reduction loop keeps for the output loop ---------------
    # Both loops walk the row thread-strided, so each thread keeps only the positions it
    # visits: slot ``i / BLOCK`` of a small per-thread array.
    def scratch_declaration(self, buffer: Buffer) -> str:
        return f"{self.ctype(buffer.dtype)} {buffer.name}[{max(-(-buffer.size // BLOCK), 1)}];"

    def element(self, buffer: Buffer, index, offset: Node | None) -> str:
        if buffer.scratch:
            return f"{buffer.name}[({self.index(index)}) / {BLOCK}]"
        return super().element(buffer, index, offset)

    def first_thread(self) -> str:
        if self.mapping.rows:
            return f"{THREAD} == 0"
        return f"{self.builtin('block')} == 0 && {THREAD} == 0"

    # --- block reductions ------------------------------------------------------------------
    def acc_finish(self, acc: Accumulator) -> list[str]:
        combine = self.block_reduction(acc) if acc in self.mapping.accumulators else []
        return combine + super().acc_finish(acc)

    def combine_slots(self) -> int:
        """Entries of a block reduction's shared arrays: one per thread, or per warp."""
        return BLOCK // self.warp_size if self.warp_size else BLOCK

    def combine_scratch(self, acc: Accumulator) -> list[str]:
        """Shared arrays the block reduction of ``acc`` goes through."""
        return [f"{self.shared_qualifier} {ctype} {name}_s[{self.combine_slots()}];"
                for name, ctype, _ in self.components(acc)]

    def combine(self, acc: Accumulator, mine: list[str], other: list[str]) -> list[str]:
        """Statements merging the partial state ``other`` into ``mine`` (expressions)."""
        kind = acc.kind
        if kind in ("argmax", "argmin"):
            (mv, mi), (ov, oi) = mine[:2], other[:2]
            better = ">" if kind == "argmax" else "<"
            tie = f"({ov} == {mv} || ({ov} != {ov} && {mv} != {mv}))"
            take = f"{ov} {better} {mv} || ({ov} != {ov} && {mv} == {mv}) || ({tie} && {oi} < {mi})"
            return [f"if ({take}) {{ {mv} = {ov}; {mi} = {oi}; }}"]
        if kind in ("max", "min"):
            better = ">" if kind == "max" else "<"
            lines = [f"{mine[0]} = {other[0]} {better} {mine[0]} ? {other[0]} : {mine[0]};"]
            if len(mine) > 1:
                lines.append(f"{mine[1]} |= {other[1]};")
            return lines
        return [f"{mine[0]} {C_OPERATORS[kind]}= {other[0]};"]

    def block_reduction(self, acc: Accumulator) -> list[str]:
        """Combine every thread's partial ``acc``; all threads end with the result."""
        names = [name for name, _, _ in self.components(acc)]
        lines = [f"{name}_s[{THREAD}] = {name};" for name in names]
        lines.append(self.barrier())
        lines.append(f"for (int s = {BLOCK // 2}; s > 0; s >>= 1) {{")
        mine = [f"{name}_s[{THREAD}]" for name in names]
        other = [f"{name}_s[{THREAD} + s]" for name in names]
        lines.append(f"  if ({THREAD} < s) {{ {' '.join(self.combine(acc, mine, other))} }}")
        lines += [f"  {self.barrier()}", "}"]
        lines += [f"{name} = {name}_s[0];" for name in names]
        lines.append(self.barrier())  # the scratch may be reused by the next reduction
        return ["{", *("  " + line for line in lines), "}"]

    # --- GEMM ------------------------------------------------------------------------
    def render_gemm(self, name: str, plan: GemmPlan) -> tuple[str, LaunchShape]:
        """A tiled GEMM kernel ``C[bt] = A[bt] @ B[bt]`` over the strided operands of
        ``plan``; C is row-major, laid out as ``plan.output``.

        A block of 16 x 16 threads computes a 64 x 64 tile of C, each thread 4 x 4 values
        held in registers (rows ``ty + 16 i``, columns ``tx + 16 j``: conflict-free shared
        reads, coalesced stores); K goes by 16 through shared-memory tiles of A and B,
        which the block's threads load along each operand's contiguous axis."""
        ctype = self.storage_types[plan.dtype.name]
        g, q, it = self.global_qualifier, self.shared_qualifier, "int64_t"
        side, depth, per = GEMM_TILE * GEMM_REGS, GEMM_TILE, GEMM_REGS
        fma = self.library_function("fma", plan.dtype)
        batch = math.prod(plan.batch)
        params = (f"{g}const {ctype} *{self.restrict} A, {g}const {ctype} *{self.restrict} B, "
                  f"{g}{ctype} *{self.restrict} C")
        body = [
            f"{q} {ctype} As[{depth}][{side + 1}];",
            f"{q} {ctype} Bs[{depth}][{side + 1}];",
            f"const int tx = {self.builtin('thread', 0)}, ty = {self.builtin('thread', 1)};",
            f"const int t = ty * {GEMM_TILE} + tx;",
            f"const {it} c0 = ({it}){self.builtin('block', 0)} * {side};",
            # a 32-bit batch index (the grid's z extent is far below 2^31): NVRTC 13.5
            # crashed compiling 64-bit division chains over two batch axes
            f"for (int bt = {self.builtin('block', 2)}; bt < {batch}; "
            f"bt += {self.builtin('blocks', 2)}) {{",
            f"  {g}const {ctype} *a = A + {_batch_offset(plan.a, plan)};",
            f"  {g}const {ctype} *b = B + {_batch_offset(plan.b, plan)};",
            f"  {g}{ctype} *c = C + {_batch_offset(plan.output, plan)};",
            f"  for ({it} r0 = ({it}){self.builtin('block', 1)} * {side}; r0 < {plan.m}; "
            f"r0 += ({it}){self.builtin('blocks', 1)} * {side}) {{",
            f"    {ctype} acc[{per}][{per}];",
            f"    for (int i = 0; i < {per}; i++) for (int j = 0; j < {per}; j++) acc[i][j] = 0;",
            f"    for ({it} k0 = 0; k0 < {plan.k}; k0 += {depth}) {{",
            *("      " + line for line in _tile_loads(plan, side, depth)),
            f"      {self.barrier()}",
            f"      for (int kk = 0; kk < {depth}; kk++) {{",
            f"        {ctype} x[{per}], y[{per}];",
            f"        for (int i = 0; i < {per}; i++) x[i] = As[kk][ty + {GEMM_TILE} * i];",
            f"        for (int j = 0; j < {per}; j++) y[j] = Bs[kk][tx + {GEMM_TILE} * j];",
            f"        for (int i = 0; i < {per}; i++) for (int j = 0; j < {per}; j++) "
            f"acc[i][j] = {fma}(x[i], y[j], acc[i][j]);",
            "      }",
            f"      {self.barrier()}",
            "    }",
            f"    for (int i = 0; i < {per}; i++) for (int j = 0; j < {per}; j++) {{",
            f"      const {it} row = r0 + ty + {GEMM_TILE} * i, col = c0 + tx + {GEMM_TILE} * j;",
            f"      if (row < {plan.m} && col < {plan.n}) "
            f"c[row * {plan.output.ld} + col] = acc[i][j];",
            "    }",
            "  }",
            "}",
        ]
        block = (GEMM_TILE, GEMM_TILE, 1)
        lines = [f"{self.prefix(block)} {name}({params}) {{", *("  " + b for b in body), "}"]
        blocks = (-(-plan.n // side), min(-(-plan.m // side), self.max_blocks),
                  min(batch, self.max_blocks))
        return "\n".join(lines), LaunchShape(tuple(max(1, b) for b in blocks), block)


def _tile_loads(plan: GemmPlan, side: int, depth: int) -> list[str]:
    """Statements loading a ``side x depth`` tile of A and a ``depth x side`` tile of B
    (zero outside the matrices) into ``As[k][row]`` and ``Bs[k][col]``: consecutive
    threads take consecutive elements of the operand's contiguous axis (coalesced)."""
    threads = GEMM_TILE * GEMM_TILE
    lines = []
    for matrix, pointer, slot, outer, extent in ((plan.a, "a", "As", "r0", plan.m),
                                                  (plan.b, "b", "Bs", "c0", plan.n)):
        # along k in memory: A row-major, B transposed; else along rows / columns
        along_k = matrix.transposed == (pointer == "b")
        k, other = ("e % {d}", "e / {d}") if along_k else ("e / {s}", "e % {s}")
        k, other = k.format(d=depth, s=side), other.format(d=depth, s=side)
        row, col = (f"{outer} + p", "k0 + q") if pointer == "a" else ("k0 + q", f"{outer} + p")
        address = (f"({col}) * {matrix.ld} + {row}" if matrix.transposed
                   else f"({row}) * {matrix.ld} + {col}")
        lines += [f"for (int e = t; e < {side * depth}; e += {threads}) {{",
                  f"  const int q = {k}, p = {other};",
                  f"  {slot}[q][p] = ({outer} + p < {extent} && k0 + q < {plan.k}) ? "
                  f"{pointer}[{address}] : 0;",
                  "}"]
    return lines


def _batch_offset(matrix: Matrix, plan: GemmPlan) -> str:
    """Element offset of batch ``bt`` (row-major over the batch axes) in an operand or
    the output."""
    terms = [str(matrix.offset)]
    stride = 1
    for extent, step in reversed(list(zip(plan.batch, matrix.batch_strides))):
        if extent > 1 and step:
            terms.append(f"(int64_t)(bt / {stride} % {extent}) * {step}")
        stride *= extent
    return "(" + " + ".join(terms) + ")"


# Math the C tables name that GPU dialects lack: name -> body over ``x`` ({T}: its type).
_HELPERS = {
    # 1 / (1 + exp(-x)) through exp(-|x|): no overflow, relative accuracy for x << 0
    "sigmoid": "{T} e = {f_exp}(-{f_fabs}(x)); return (x >= {zero} ? {one} : e) / ({one} + e);",
}


# --- the mapping of loops onto the grid ----------------------------------------------

def _perfect_nest(loop: Loop) -> list[Loop]:
    """``loop`` and the loops perfectly nested in it, down to a sequential one (whose
    iterations must stay in one thread: a scan, a scatter's repeated positions)."""
    nest = [loop]
    while (len(nest[-1].body) == 1 and isinstance(nest[-1].body[0], Loop)
           and not nest[-1].body[0].sequential):
        nest.append(nest[-1].body[0])
    return nest


def _has_reduction(stmts: list[Stmt]) -> bool:
    return any(isinstance(s, Loop) and s.accumulators for s in walk(stmts))


def _map_loops(kernel: Kernel) -> _Mapping:
    if not _has_reduction(kernel.body):
        mapping = _Mapping(rows=False)
        # (a sequential loop at the top runs in one thread: its stores are guarded)
        top = [s for s in kernel.body if isinstance(s, Loop) and not s.sequential]
        for loop in top:
            mapping.roles[id(loop)] = "grid"
            mapping.iterations = max(mapping.iterations, _nest_size(loop))
        _guard_stores(kernel.body, mapping)
        return mapping
    mapping = _Mapping(rows=True)
    body = kernel.body
    while True:
        loops = [s for s in body if isinstance(s, Loop)]
        if len(loops) != 1 or loops[0].accumulators or not _has_reduction(loops[0].body):
            break  # (``loops``: the loops inside a row, spread over the block's threads)
        if not mapping.roles:  # block-strided; a perfect nest of row loops collapses into it
            mapping.roles[id(loops[0])] = "block"
            mapping.iterations = _nest_size(loops[0])
            body = _perfect_nest(loops[0])[-1].body
        else:  # rows of rows that are not a perfect nest: the block walks them in turn
            body = loops[0].body
    mapping.roles.update((id(loop), "thread") for loop in loops)
    _check_scratch(kernel, body)
    mapping.accumulators = list({s.acc.name: s.acc for s in walk(loops)
                                 if isinstance(s, AccUpdate)}.values())
    _guard_stores(kernel.body, mapping)
    return mapping


def _is_float_product_sum(update: AccUpdate) -> bool:
    value = update.value
    return (update.acc.kind == "sum" and update.acc.dtype.kind == "f"
            and isinstance(value, Op) and value.op == "mul" and value.dtype == update.acc.dtype)


def _check_scratch(kernel: Kernel, row: list[Stmt]) -> None:
    """Scratch rows are read and written only at a thread-strided loop's own position
    (what ``GpuRenderer.element`` relies on)."""
    spread = {ix.var(loop.sym) for loop in row
              if isinstance(loop, Loop) and len(_perfect_nest(loop)) == 1}
    for stmt in walk(kernel.body):
        for access in (stmt, getattr(stmt, "value", None)):  # a store, a kept value's load
            if (isinstance(access, (Store, Load)) and access.buffer.scratch
                    and access.index not in spread):
                raise AssertionError(f"internal error: scratch row {access.index!r} of "
                                     f"{kernel.name} is not indexed by a thread-strided row loop")


def _nest_size(loop: Loop) -> int:
    return math.prod(member.sym.extent for member in _perfect_nest(loop))


def _guard_stores(stmts: list[Stmt], mapping: _Mapping) -> None:
    """Stores outside every spread loop are done by one thread."""
    for stmt in stmts:
        if isinstance(stmt, Store):
            mapping.guarded.add(id(stmt))
        elif isinstance(stmt, Loop) and mapping.roles.get(id(stmt)) not in ("grid", "thread"):
            _guard_stores(stmt.body, mapping)


def _fits_int32(kernel: Kernel, max_blocks: int) -> bool:
    largest = max([b.size for b in kernel.params] +
                  [_nest_size(s) for s in walk(kernel.body) if isinstance(s, Loop)] + [1])
    return largest + max_blocks * BLOCK < _INT32_LIMIT


def integer_power_function(qualifier: str) -> str:
    """x ** y for integers, wrapping modulo 2^64 like NumPy: ``ember_ipow`` (what the C
    tables call; a negative y gives 0) and ``ember_upow`` (an unsigned y, which may be
    2^63 or more: the pow row's "gpu" template)."""
    parts = []
    for name, exponent_type, negative in (("ipow", "int64_t", "  if (exponent < 0) return 0;\n"),
                                          ("upow", "uint64_t", "")):
        parts.append(f"""{qualifier} uint64_t ember_{name}(uint64_t base, {exponent_type} exponent) {{
{negative}  uint64_t result = 1;
  while (exponent) {{
    if (exponent & 1) result *= base;
    base *= base;
    exponent >>= 1;
  }}
  return result;
}}
""")
    return "".join(parts)
