"""Gather starts computed from iotas fold into the read's affine index where they stay in
range (im2col's patch positions), so the patch kernel is a strided copy with no clamp;
starts that may leave the range, or whose arithmetic may wrap, keep their clamp."""
from __future__ import annotations

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu.backend import cpu_policy
from ember.codegen.c import CRenderer
from ember.codegen.kernel_ir import Let, Load, Op
from ember.compiler.steps import lower_schedule
from ember.passes.fusion import absorb_into_contractions, schedule_groups
from ember.passes.pipeline import run_pipeline

POLICY = cpu_policy(CRenderer(2))
rng = np.random.default_rng(0)


def kernels_of(fun, *args):
    graph = absorb_into_contractions(run_pipeline(ember.jit(fun).lower(*args).graph, "cpu"),
                                     POLICY)
    steps = lower_schedule(schedule_groups(graph, POLICY), threads=2)
    return [step.kernel for step in steps if step.kernel is not None]


def gather_loads(kernel) -> list[Load]:
    return [stmt.node for stmt in kernel.walk()
            if isinstance(stmt, Let) and isinstance(stmt.node, Load)
            and stmt.node.prim == "gather"]


def ops(kernel) -> set[str]:
    return {stmt.node.op for stmt in kernel.walk()
            if isinstance(stmt, Let) and isinstance(stmt.node, Op)}


def windows(x):
    """Each window of 3 at stride 2 of a vector of 13: positions 2 p + t, all inside."""
    return x[jnp.arange(6)[:, None] * 2 + jnp.arange(3)]


def test_im2col_patches_are_read_at_affine_positions_without_a_clamp():
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1)))
    loads = [load for kernel in kernels_of(conv, x, w) for load in gather_loads(kernel)]
    assert loads and all(load.offset is None for load in loads)
    reference = ember.jit(conv, backend="reference")(x, w)
    np.testing.assert_allclose(np.asarray(ember.jit(conv)(x, w)), np.asarray(reference),
                               rtol=1e-5, atol=1e-5)


def test_in_range_iota_positions_fold_and_read_the_right_elements():
    x = np.arange(13, dtype=np.float32)
    (kernel,) = [k for k in kernels_of(windows, x) if gather_loads(k)]
    (load,) = gather_loads(kernel)
    assert load.offset is None and not {"max", "min"} & ops(kernel)
    expected = x[np.arange(6)[:, None] * 2 + np.arange(3)]
    np.testing.assert_array_equal(np.asarray(ember.jit(windows)(x)), expected)


def test_positions_that_may_leave_the_array_keep_their_clamp():
    x = np.arange(8, dtype=np.float32)  # windows reach position 12: clamped to 7
    (kernel,) = [k for k in kernels_of(windows, x) if gather_loads(k)]
    (load,) = gather_loads(kernel)
    assert load.offset is not None
    expected = x[np.minimum(np.arange(6)[:, None] * 2 + np.arange(3), 7)]
    np.testing.assert_array_equal(np.asarray(ember.jit(windows)(x)), expected)


def test_positions_whose_arithmetic_wraps_are_not_folded():
    def wrapped(x):  # int8: 100 * p wraps for p >= 2, so positions are not 100 p + t
        return x[(jnp.arange(4, dtype=jnp.int8)[:, None] * 100
                  + jnp.arange(3, dtype=jnp.int8)).astype(jnp.int32) % 64]

    x = np.arange(64, dtype=np.float32)
    reference = ember.jit(wrapped, backend="reference")(x)
    np.testing.assert_array_equal(np.asarray(ember.jit(wrapped)(x)), np.asarray(reference))
    int8_positions = (np.arange(4)[:, None] * 100 + np.arange(3)).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(reference), x[int8_positions.astype(np.int32) % 64])
