"""Gather, dynamic slices, scatters and cumulative ops compiled natively on the CPU
backend (no host calls): every program of ``indexing_programs`` against the reference
backend, kernel counts of the fusions they allow, and the order a scatter keeps."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from cpu_testing import compiled, requires_cpu

import ember

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "opencl"))
from gpu_programs import assert_trees_same, x64_mode  # noqa: E402
from indexing_programs import CASES, KERNEL_COUNTS  # noqa: E402

pytestmark = requires_cpu


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_matches_the_reference_without_host_calls(name):
    case = CASES[name]
    with x64_mode(case.x64):
        args = case.args()
        got = ember.jit(case.fun, backend="cpu")(*args)
        want = ember.jit(case.fun, backend="reference")(*args)
        assert_trees_same(got, want, case.tolerance)
        kinds = [k.kind for k in compiled(case.fun, *args).kernels]
    assert "host" not in kinds


@pytest.mark.parametrize("name", sorted(KERNEL_COUNTS))
def test_indexing_fuses_into_one_kernel(name):
    fun, make_args = KERNEL_COUNTS[name]
    args = make_args(np.random.default_rng(0))
    kernels = compiled(fun, *args).kernels
    assert [k.kind for k in kernels] == ["kernel"], [(k.ops, k.why_boundary) for k in kernels]
    assert_trees_same(ember.jit(fun, backend="cpu")(*args),
                      ember.jit(fun, backend="reference")(*args))


def test_embedding_lookup_is_a_load_at_the_looked_up_row():
    fun, make_args = KERNEL_COUNTS["embedding_scaled"]
    (kernel,) = compiled(fun, *make_args(np.random.default_rng(0))).kernels
    assert "gather" in kernel.ops and "mul" in kernel.ops
    assert "#pragma omp simd" in kernel.source  # along the row: contiguous


def test_a_scatter_result_is_stored_by_its_own_kernel_and_says_why():
    def fun(x, i, u):
        dims = ember.lax.ScatterDimensionNumbers((), (0,), (0,))
        return ember.lax.scatter_add(x, i, u, dims) * 2.0

    args = (np.ones(6, np.float32), np.array([[1], [1], [7]], np.int32),
            np.ones(3, np.float32))
    kernels = compiled(fun, *args).kernels
    assert [k.kind for k in kernels] == ["kernel", "kernel"]
    assert "scatter_add writes data-dependent positions" in kernels[0].why_boundary
    assert_trees_same(ember.jit(fun, backend="cpu")(*args), np.array([2, 6, 2, 2, 2, 2],
                                                                     np.float32))


def test_a_cumulative_op_computes_its_operand_in_its_own_loops():
    def fun(x):
        return ember.lax.cumsum(ember.numpy.exp(x), 1)

    (kernel,) = compiled(fun, np.ones((4, 5), np.float32)).kernels
    assert kernel.ops == ["cumsum", "exp"]


def test_repeated_scatter_positions_combine_in_the_references_order_in_parallel():
    """Parallel over the independent axis (the rows' columns), in order over the
    repeated ids: the float sums are bit-identical to the reference's."""
    case = CASES["scatter_add_parallel"]
    args = case.args()
    kernel = compiled(case.fun, *args).kernels[0]
    assert "#pragma omp parallel for" in kernel.source
    got = ember.jit(case.fun, backend="cpu")(*args)
    want = ember.jit(case.fun, backend="reference")(*args)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_the_overwriting_scatter_keeps_the_last_update_as_the_reference():
    x = np.zeros(4, np.float32)
    i = np.array([2, 0, 2, 2, 0], np.int32)
    u = np.arange(1, 6, dtype=np.float32)
    got = ember.jit(lambda x, i, u: x.at[i].set(u), backend="cpu")(x, i, u)
    np.testing.assert_array_equal(np.asarray(got), [5, 0, 4, 0])


def test_the_demo_train_step_has_no_host_calls():
    from ember import demo

    cfg = demo.GPTConfig(width=32, heads=2, layers=1, batch=2, length=8)
    model = demo.GPT.init(ember.random.PRNGKey(0), cfg)
    optimizer = demo.make_optimizer(10)
    tokens = np.zeros((cfg.batch, cfg.length), np.int32)
    step = ember.jit(demo.make_train_step(optimizer))
    kernels = step.lower(model, optimizer.init(model), tokens, tokens).compile().kernels
    assert "host" not in {k.kind for k in kernels}
