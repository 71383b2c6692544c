"""The table-driven renderer: C output of small kernel IR, what the tables cover, and a
target that changes only tables and hooks."""
from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ember.codegen import indexing as ix
from ember.codegen.c import CRenderer
from ember.codegen.indexing import Sym
from ember.codegen.kernel_ir import (
    AccFinish,
    AccInit,
    Accumulator,
    AccUpdate,
    AccValue,
    Buffer,
    Const,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    Store,
)

F32, F16, I32 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int32)


def numbered(*nodes):
    for n, node in enumerate(nodes):
        node.id = n
        node.source = "model.py:3" if isinstance(node, Op) else ""
    return nodes


def row_max_kernel() -> Kernel:
    """out[o] = max over k of exp(x[o, k]) (a reduction loop inside a parallel loop)."""
    o, k = Sym("o0", 64), Sym("k0", 32)
    x, out = Buffer("b0", F32, 64 * 32), Buffer("b1", F32, 64)
    out.written = True
    load = Load(x, ix.add(ix.scale(ix.var(o), 32), ix.var(k)), F32)
    exp = Op("exp", (load,), F32)
    acc = Accumulator("acc0", "max", F32, F32)
    result = AccValue(acc)
    numbered(load, exp, result)
    inner = Loop(k, [Let(load), Let(exp), AccUpdate(acc, exp)], vector=True, accumulators=[acc])
    body = [AccInit(acc), inner, AccFinish(acc), Let(result), Store(out, ix.var(o), result)]
    return Kernel("rowmax", [x, out], [Loop(o, body, parallel=True)])


def test_c_kernel_has_restrict_parameters_pragmas_and_source_lines():
    text = CRenderer(threads=4, vector_math={"exp"}).render_kernel(row_max_kernel())
    assert "static void rowmax(const float *restrict b0, float *restrict b1)" in text
    assert "#pragma omp parallel for num_threads(4) schedule(guided)" in text
    assert "#pragma omp simd reduction(max:acc0) reduction(|:acc0_nan)" in text
    assert "ember_expf(t0)" in text and "// exp at model.py:3" in text
    assert "if (acc0_nan) acc0 = NAN;" in text
    assert "b1[o0] = t2;" in text


def test_libm_is_used_where_the_vector_math_header_lacks_a_function():
    text = CRenderer(threads=1).render_kernel(row_max_kernel())
    assert "expf(t0)" in text and "ember_expf" not in text


def test_half_precision_is_loaded_and_stored_through_float():
    i = Sym("i0", 8)
    x, y = Buffer("b0", F16, 8), Buffer("b1", F16, 8)
    y.written = True
    load = Load(x, ix.var(i), F16)
    double = Op("add", (load, load), F16)
    numbered(load, double)
    kernel = Kernel("twice", [x, y], [Loop(i, [Let(load), Let(double),
                                               Store(y, ix.var(i), double)])])
    text = CRenderer().render_kernel(kernel)
    assert "const uint16_t *restrict b0" in text
    assert "float t0 = ember_f16_to_f32(b0[i0]);" in text
    assert "b1[i0] = ember_f32_to_f16(t1);" in text


def test_an_in_place_parameter_becomes_an_alias_of_its_target():
    i = Sym("i0", 8)
    x, y = Buffer("b0", F32, 8), Buffer("b1", F32, 8)
    y.written = True
    load = Load(x, ix.var(i), F32)
    numbered(load)
    kernel = Kernel("copy", [x, y], [Loop(i, [Let(load), Store(y, ix.var(i), load)])])
    text = CRenderer().render_kernel(kernel, aliases={y: x})
    assert "static void copy(float *restrict b0)" in text
    assert "float *b1 = (float *)b0;" in text


def test_constants_are_exact():
    renderer = CRenderer()
    assert renderer.constant(np.iinfo(np.int32).min, I32) == "((int32_t)(-2147483647LL - 1))"
    assert renderer.constant(math.inf, F32) == "INFINITY"
    assert renderer.constant(math.nan, np.dtype(np.float64)) == "((double)NAN)"
    assert float(renderer.constant(0.1, F32).rstrip("f")) == 0.1


def test_conversions_saturate_and_round_half_precision():
    renderer = CRenderer()
    x = Const(0.0, F32)
    x.id = 0
    to_int = Op("convert_element_type", (x,), I32, I32)
    to_half = Op("convert_element_type", (x,), F16, F16)
    numbered(x, to_int, to_half)
    int_text = renderer.expression(to_int)
    assert "2147483647" in int_text and "!=" in int_text  # NaN -> 0, saturating
    assert "ember_f16_to_f32(ember_f32_to_f16(" in renderer.expression(to_half)


def test_tables_say_what_the_target_covers():
    renderer = CRenderer()
    assert renderer.supports("tanh", F32) and renderer.supports("shift_left", I32)
    assert not renderer.supports("tanh", I32)
    assert not renderer.supports("nextafter", F16)  # needs the next 16-bit value
    assert renderer.supports("erf_inv", F32) and renderer.supports("digamma", F16)
    assert not renderer.supports("add", np.dtype(np.complex64))


class _MarkedRenderer(CRenderer):
    """A target that differs from C only by its tables and the kernel header."""

    op_templates: ClassVar = {**CRenderer.op_templates, "exp": {"float": "fast_exp({0})"}}

    def kernel_header(self, kernel, params):
        return "__kernel void " + kernel.name + "(" + ", ".join(
            f"__global float *{b.name}" for b, _ in params) + ")"


def test_a_new_target_changes_tables_not_logic():
    text = _MarkedRenderer().render_kernel(row_max_kernel())
    assert text.startswith("__kernel void rowmax(__global float *b0, __global float *b1)")
    assert "fast_exp(t0)" in text
    assert "acc0 = t1 > acc0 ? t1 : acc0;" in text  # the same reduction logic
