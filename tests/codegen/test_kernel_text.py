"""The kernel IR as text (what EMBER_DUMP writes for the kernel_ir stage)."""
from __future__ import annotations

import re

import numpy as np

from ember.codegen import indexing as ix
from ember.codegen.indexing import Sym
from ember.codegen.kernel_ir import (AccFinish, AccInit, Accumulator, AccUpdate, AccValue,
                                     Buffer, Const, Kernel, Let, Load, Loop, Op, Store)
from ember.codegen.kernel_text import kernel_text

F32 = np.dtype(np.float32)


def test_a_row_reduction_reads_as_its_loops_and_statements():
    """out[o] = max over k of exp(x[o, k]) + 1."""
    o, k = Sym("o0", 64), Sym("k0", 32)
    x, out = Buffer("b0", F32, 64 * 32, label="x:f32[64,32]"), Buffer("b1", F32, 64)
    out.written = True
    load = Load(x, ix.add(ix.scale(ix.var(o), 32), ix.var(k)), F32)
    exp = Op("exp", (load,), F32)
    acc = Accumulator("acc0", "max", F32, F32)
    result = AccValue(acc)
    plus = Op("add", (result, Const(1.0, F32)), F32)
    for number, node in enumerate((load, exp, result, plus)):
        node.id = number
    inner = Loop(k, [Let(load), Let(exp), AccUpdate(acc, exp)], vector=True, accumulators=[acc])
    body = [AccInit(acc), inner, AccFinish(acc), Let(result), Let(plus),
            Store(out, ix.var(o), plus)]
    kernel = Kernel("rowmax", [x, out], [Loop(o, body, parallel=True)])
    assert kernel_text(kernel).splitlines() == [
        "kernel rowmax(b0: float32[2048] x:f32[64,32], b1: float32[64] written)",
        "  loop o0 < 64 parallel:",
        "    init acc0",
        "    loop k0 < 32 vector reduces acc0: max float32:",
        "      t0 = load b0[k0 + 32*o0]",
        "      t1 = exp(t0) : float32",
        "      update acc0 with t1",
        "    finish acc0",
        "    t2 = value of acc0",
        "    t3 = add(t2, 1.0) : float32",
        "    store b1[o0] = t3",
    ]


def test_every_statement_of_a_scatter_and_a_scan_reads_as_text():
    import ember
    import ember.numpy as jnp
    from ember.backends.cpu.backend import CpuTarget
    from ember.compiler.steps import steps_text
    from ember.compiler.pipeline import compile_program

    def fun(x, i):
        return jnp.cumsum(x.at[i].add(x[:3] * 2.0)), jnp.where(x > 0, x, -x)[i]

    graph = ember.jit(fun).lower(np.ones(8, np.float32), np.array([1, 5, 1])).graph
    text = steps_text(compile_program(graph, "cpu", CpuTarget(lambda g: None),
                                      until="kernel_ir").steps)
    assert "barrier" in text and " sequential" in text  # (the scatter: copy, then updates)
    assert re.search(r"store (b\d\[.*\]) = add\(\1, t\d+\) if t", text)  # (scatter-add)
    assert "running of scan" in text  # (the scan's running sum)
    assert re.search(r"convert_element_type\(t\d+; int64\) : int64", text)  # (its param)
