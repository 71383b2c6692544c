"""Gather, dynamic slices, scatters and cumulative ops on OpenCL (PoCL in CI) against the
reference backend, with the CPU backend's kernel boundaries (a scatter launches its
copy and its updates as two kernels of one step)."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_programs import assert_trees_same, x64_mode
from indexing_programs import CASES, KERNEL_COUNTS

import ember
from ember.runtime.devices import available_backends

pytestmark = pytest.mark.skipif("opencl" not in available_backends(),
                                reason="no OpenCL device: install PoCL and pyopencl")


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_matches_the_reference(name):
    case = CASES[name]
    with x64_mode(case.x64):
        args = case.args()
        got = ember.jit(case.fun, backend="opencl")(*args)
        want = ember.jit(case.fun, backend="reference")(*args)
        assert_trees_same(got, want, case.tolerance)


@pytest.mark.parametrize("name", sorted(KERNEL_COUNTS))
def test_kernel_boundaries_are_the_cpu_backends(name):
    if "cpu" not in available_backends():
        pytest.skip("no C compiler: the CPU backend is absent")
    fun, make_args = KERNEL_COUNTS[name]
    args = make_args(np.random.default_rng(0))
    cpu = ember.jit(fun, backend="cpu").lower(*args).compile()
    opencl = ember.jit(fun, backend="opencl").lower(*args).compile()
    assert [k.kind for k in opencl.kernels] == ["kernel"]
    assert [(k.kind, k.ops) for k in opencl.kernels] == [(k.kind, k.ops) for k in cpu.kernels]


def test_a_scatter_copies_its_operand_then_runs_its_updates_in_a_second_kernel():
    fun, make_args = KERNEL_COUNTS["embedding_gradient"]
    compiled = ember.jit(fun, backend="opencl").lower(*make_args(np.random.default_rng(0))).compile()
    (info,) = compiled.kernels
    assert info.source.count("__kernel") == 2
    (step,) = compiled.executable.program.steps
    assert [launch.kernel for launch in step.launches] == ["fusion_0", "fusion_0_1"]
