"""The kernel IR as text (what ``EMBER_DUMP`` writes): one statement a line, loops
indented, values named ``t<id>`` as the renderers name them.

    kernel fusion_0(b0: float32[1024] f32[32,32], b1: float32[1024] f32[1024] written)
      loop i0 < 1024 parallel vector:
        t3 = load b0[i0]
        t4 = cos(t3)
        store b1[i0] = t4
"""
from __future__ import annotations

from ember.codegen.kernel_ir import (AccFinish, AccInit, AccUpdate, AccValue, Barrier, Buffer,
                                     Const, IndexCond, IndexValue, Kernel, Let, Load, Loop,
                                     Node, Op, RunningValue, Scratch, Stmt, Store)


def kernel_text(kernel: Kernel) -> str:
    params = ", ".join(_buffer(b) for b in kernel.params)
    return "\n".join([f"kernel {kernel.name}({params})", *_block(kernel.body, 1)])


def _buffer(buffer: Buffer) -> str:
    facts = [f for f, holds in (("written", buffer.written), ("scratch", buffer.scratch)) if holds]
    return " ".join([f"{buffer.name}: {buffer.dtype.name}[{buffer.size}]",
                     *([buffer.label] if buffer.label else []), *facts])


def _block(stmts: list[Stmt], depth: int) -> list[str]:
    pad = "  " * depth
    lines = []
    for stmt in stmts:
        if isinstance(stmt, Loop):
            flags = [f for f in ("parallel", "vector", "sequential") if getattr(stmt, f)]
            accs = [f"{a.name}: {a.kind} {a.dtype.name}" for a in stmt.accumulators]
            head = " ".join([f"loop {stmt.sym.name} < {stmt.sym.extent}", *flags])
            lines.append(pad + head + (f" reduces {', '.join(accs)}" if accs else "") + ":")
            lines += _block(stmt.body, depth + 1)
        else:
            lines.append(pad + _statement(stmt))
    return lines


def _statement(stmt: Stmt) -> str:
    if isinstance(stmt, Let):
        return f"{_ref(stmt.node)} = {_value(stmt.value or stmt.node)}"
    if isinstance(stmt, Store):
        target = f"{stmt.buffer.name}[{_position(stmt.index, stmt.offset)}]"
        value = _ref(stmt.value) if stmt.combine is None else \
            f"{stmt.combine}({target}, {_ref(stmt.value)})"
        guard = f" if {_ref(stmt.guard)}" if stmt.guard is not None else ""
        return f"store {target} = {value}{guard}"
    if isinstance(stmt, Scratch):
        return f"scratch {_buffer(stmt.buffer)}"
    if isinstance(stmt, Barrier):
        return "barrier"
    if isinstance(stmt, AccInit):
        return f"init {stmt.acc.name}"
    if isinstance(stmt, AccUpdate):
        at = f" at {stmt.position!r}" if stmt.position is not None else ""
        return f"update {stmt.acc.name} with {_ref(stmt.value)}{at}"
    if isinstance(stmt, AccFinish):
        return f"finish {stmt.acc.name}"
    raise TypeError(f"unknown statement {stmt!r}")


def _value(node: Node) -> str:
    if isinstance(node, Load):
        guard = f" if {_ref(node.guard)}" if node.guard is not None else ""
        return f"load {node.buffer.name}[{_position(node.index, node.offset)}]{guard}"
    if isinstance(node, Op):
        param = f"; {node.param}" if node.param is not None else ""
        return f"{node.op}({', '.join(_ref(a) for a in node.args)}{param}) : {node.dtype.name}"
    if isinstance(node, IndexValue):
        return f"index {node.index!r} : {node.dtype.name}"
    if isinstance(node, IndexCond):
        return f"{node.lo} <= {node.index!r} <= {node.hi} step {node.step}"
    if isinstance(node, (AccValue, RunningValue)):
        return f"{'value' if isinstance(node, AccValue) else 'running'} of {node.acc.name}"
    return _ref(node)


def _ref(node: Node) -> str:
    return repr(node.value) if isinstance(node, Const) else f"t{node.id}"


def _position(index, offset: Node | None) -> str:
    return f"{index!r}" if offset is None else f"{index!r} + {_ref(offset)}"
