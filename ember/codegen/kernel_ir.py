"""The kernel IR: loops, loads with index expressions, stores and accumulators.

A kernel is straight-line scalar code inside loop nests, written as statements:

- ``Loop(sym, body, parallel, vector, accumulators)``: ``for sym in range(sym.extent)``;
  ``parallel`` marks iterations that may run on different threads, ``vector`` a loop
  whose iterations may run in SIMD lanes; ``accumulators`` are reduced across iterations.
- ``Let(node)``: compute a value node into a scalar temporary. Nodes (``Load``, ``Op``,
  ``IndexValue``, ``IndexCond``, ``AccValue``, ``RunningValue``) are hash-consed by the
  builder, so one node is one value; a node's operands are bound by earlier ``Let``
  statements in an enclosing block, or are ``Const``.
- ``Store(buffer, index, node)``, ``AccInit(acc)``, ``AccUpdate(acc, node, position)``
  (``position`` is the flat reduction index, for argmax / argmin), ``AccFinish(acc)``.
- Data-dependent positions (gather, scatter, dynamic slices): a ``Load`` or ``Store``
  may add an ``offset`` node (an int64 value computed in the kernel) to its affine
  index; a ``Store`` may ``combine`` the value with what the buffer holds (scatter_add)
  and store only where its ``guard`` holds (dropped out-of-bounds updates).
- ``Loop(..., sequential=True)``: iterations that must run in order in one thread (a
  scan's running value, a scatter's possibly repeated positions); ``Barrier()``: what
  follows starts once everything before it is done (a scatter's copy of its operand,
  then its updates). A CPU runs a kernel's statements in order anyway; a GPU target
  launches the parts between barriers as separate kernels (``split_at_barriers``).
- ``Scratch(buffer)``: a kernel-local array; a row-wise kernel keeps values computed in a
  reduction loop there (``Store``) and its output loop takes them back (``Let(node,
  value=Load)``) instead of recomputing them (softmax's exponentials).

Node dtypes are the *logical* dtypes of the values (float16 stays float16); a renderer
decides how to hold them (C computes half precision in float). Every renderer consumes
this IR; none of them re-derives fusion or indexing.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.codegen.indexing import Affine, Sym
from ember.ops.reductions import MONOIDS


class Buffer:
    """A kernel parameter: one array in memory, read and/or written by the kernel."""

    __slots__ = ("dtype", "label", "name", "scratch", "size", "written")

    def __init__(self, name: str, dtype: np.dtype, size: int, label: str = "",
                 scratch: bool = False) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)
        self.size = size
        self.written = False
        self.label = label  # what it holds, for comments: "x:f32[8,16]"
        self.scratch = scratch  # kernel-local (declared by ``Scratch``), in compute type

    def __repr__(self) -> str:
        return f"Buffer({self.name})"


class Node:
    """A scalar value in a kernel. Nodes are unique per content (hash-consed)."""

    __slots__ = ("dtype", "id", "source")
    dtype: np.dtype
    id: int
    source: str

    def operands(self) -> tuple[Node, ...]:
        return ()


class Const(Node):
    __slots__ = ("value",)

    def __init__(self, value: Any, dtype: np.dtype) -> None:
        self.value = value
        self.dtype = dtype


class Load(Node):
    """``buffer[index + offset]``; with a ``guard`` (a bool node), read only where it holds
    (else 0), so the index may leave the buffer where the guard is false (pad,
    concatenate). ``offset`` is an int64 node (a gather's data-dependent position), and
    ``prim`` names the primitive such a read computes."""

    __slots__ = ("buffer", "guard", "index", "offset", "prim")

    def __init__(self, buffer: Buffer, index: Affine, dtype: np.dtype,
                 guard: Node | None = None, offset: Node | None = None,
                 prim: str = "") -> None:
        self.buffer = buffer
        self.index = index
        self.dtype = dtype
        self.guard = guard
        self.offset = offset
        self.prim = prim

    def operands(self) -> tuple[Node, ...]:
        return tuple(n for n in (self.guard, self.offset) if n is not None)


class IndexCond(Node):
    """Whether ``lo <= index <= hi`` and ``(index - lo) % step == 0`` (a bool)."""

    __slots__ = ("hi", "index", "lo", "step")

    def __init__(self, index: Affine, lo: int, hi: int, step: int) -> None:
        self.index = index
        self.lo = lo
        self.hi = hi
        self.step = step
        self.dtype = np.dtype(np.bool_)


class IndexValue(Node):
    """The value of an index expression, as a number of ``dtype`` (iota)."""

    __slots__ = ("index",)

    def __init__(self, index: Affine, dtype: np.dtype) -> None:
        self.index = index
        self.dtype = dtype


class Op(Node):
    """An operation on operands; ``op`` names a row of the renderer's op table.

    ``param`` carries what the table needs besides the operands (the target dtype of a
    conversion, the exponent of integer_pow, the rounding method).
    """

    __slots__ = ("args", "op", "param")

    def __init__(self, op: str, args: tuple[Node, ...], dtype: np.dtype, param: Any = None):
        self.op = op
        self.args = args
        self.dtype = dtype
        self.param = param

    def operands(self) -> tuple[Node, ...]:
        return self.args


@dataclass(eq=False)
class Accumulator:
    """A reduction in progress: ``kind`` is sum, prod, max, min, and, or, xor, argmax or
    argmin. ``dtype`` is the accumulation dtype; ``value_dtype`` the reduced operand's."""

    name: str
    kind: str
    dtype: np.dtype
    value_dtype: np.dtype
    index_dtype: np.dtype | None = None  # argmax / argmin result

    def identity(self) -> Any:
        """The starting value: the identity of the reduction's monoid (argmax starts as
        max does)."""
        kind = {"argmax": "max", "argmin": "min"}.get(self.kind, self.kind)
        return MONOIDS[f"reduce_{kind}"].identity(self.dtype)


class AccValue(Node):
    """The result of an accumulator after its loop (the index for argmax / argmin)."""

    __slots__ = ("acc",)

    def __init__(self, acc: Accumulator) -> None:
        self.acc = acc
        self.dtype = acc.index_dtype if acc.index_dtype is not None else acc.dtype


class RunningValue(Node):
    """The value of an accumulator so far, inside its loop (a scan's output)."""

    __slots__ = ("acc",)

    def __init__(self, acc: Accumulator) -> None:
        self.acc = acc
        self.dtype = acc.dtype


class Stmt:
    __slots__ = ()


@dataclass(eq=False)
class Let(Stmt):
    """Compute ``node`` into its temporary; with ``value``, take it from there instead
    (a value kept from an earlier loop)."""

    node: Node
    value: Node | None = None


@dataclass(eq=False)
class Scratch(Stmt):
    """Declare a kernel-local array (per thread when inside a parallel loop)."""

    buffer: Buffer


@dataclass(eq=False)
class Store(Stmt):
    """``buffer[index + offset] = value``; with ``combine`` (an op of the renderer's table,
    e.g. 'add'), ``buffer[...] = combine(buffer[...], value)``; with ``guard``, only where
    the guard holds."""

    buffer: Buffer
    index: Affine
    value: Node
    offset: Node | None = None
    combine: str | None = None
    guard: Node | None = None


@dataclass(eq=False)
class Barrier(Stmt):
    """Everything before it is done before anything after it starts."""


@dataclass(eq=False)
class AccInit(Stmt):
    acc: Accumulator


@dataclass(eq=False)
class AccUpdate(Stmt):
    acc: Accumulator
    value: Node
    position: Affine | None = None


@dataclass(eq=False)
class AccFinish(Stmt):
    acc: Accumulator


@dataclass(eq=False)
class Loop(Stmt):
    sym: Sym
    body: list[Stmt]
    parallel: bool = False
    vector: bool = False
    accumulators: list[Accumulator] = field(default_factory=list)
    sequential: bool = False  # iterations run in order in one thread (scans, scatters)


@dataclass(eq=False)
class Kernel:
    """One kernel: parameters in call order and a body."""

    name: str
    params: list[Buffer]
    body: list[Stmt]
    ops: list[str] = field(default_factory=list)  # primitives computed, in order
    source_lines: list[str] = field(default_factory=list)

    def walk(self) -> Iterator[Stmt]:
        yield from walk(self.body)


def walk(body: list[Stmt]) -> Iterator[Stmt]:
    for stmt in body:
        yield stmt
        if isinstance(stmt, Loop):
            yield from walk(stmt.body)


def base_shifts(kernel: Kernel, aliases: Mapping[Buffer, Buffer]) -> dict[Buffer, int]:
    """Parameter -> how far its caller may advance its pointer: the lowest constant term
    of the positions the kernel reads and writes in that memory (a parameter that
    ``aliases`` maps to another shares its target's), where that is above 0 and within
    the buffer. Kernels that differ only in where they start in their buffers (an
    LSTM's steps, each reading its slice of one stacked product) then render alike."""
    lowest: dict[Buffer, int] = {}

    def access(buffer: Buffer, index: Affine) -> None:
        if not buffer.scratch:
            memory = aliases.get(buffer, buffer)
            lowest[memory] = min(lowest.get(memory, index.const), index.const)

    seen: set[int] = set()

    def visit(node: Node | None) -> None:
        if node is None or id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, Load):
            access(node.buffer, node.index)
        for operand in node.operands():
            visit(operand)

    for stmt in kernel.walk():
        if isinstance(stmt, Let):
            visit(stmt.node)
            visit(stmt.value)
        elif isinstance(stmt, Store):
            access(stmt.buffer, stmt.index)
    shifts = {memory: shift for memory, shift in lowest.items() if 0 < shift < memory.size}
    shifts.update({buffer: shifts[target] for buffer, target in aliases.items()
                   if target in shifts})
    return shifts


def split_at_barriers(kernel: Kernel) -> list[Kernel]:
    """The parts of ``kernel`` between its top-level barriers, as kernels of their own
    (the same parameters; parts after the first are named ``<name>_1``, ...)."""
    parts: list[list[Stmt]] = [[]]
    for stmt in kernel.body:
        if isinstance(stmt, Barrier):
            parts.append([])
        else:
            parts[-1].append(stmt)
    parts = [part for part in parts if part] or [[]]
    if len(parts) == 1:
        return [kernel]
    return [Kernel(kernel.name if n == 0 else f"{kernel.name}_{n}", kernel.params, part,
                   kernel.ops, kernel.source_lines) for n, part in enumerate(parts)]


@dataclass
class KernelInfo:
    """One generated kernel, as shown by ``compiled.kernels``."""

    name: str
    source: str  # the generated code of this kernel (C, CUDA C, OpenCL C) or a description
    ops: list[str]  # primitives it computes
    source_lines: list[str]  # user file:line of those primitives
    kind: str = "kernel"  # 'kernel', 'library' (GEMM, conv), 'host' (fallback), 'view'
    why_boundary: str = ""  # why this kernel was not fused with its consumer
