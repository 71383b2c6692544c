"""Every program of the GPU suite run on a CUDA GPU vs the reference backend (only where
a GPU is present: elsewhere the compile-only suite covers the same programs)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import ember
from ember.backends.cuda.driver import gpus

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "opencl"))
from gpu_programs import CASES, assert_trees_same, x64_mode  # noqa: E402

pytestmark = pytest.mark.skipif(not gpus(), reason="no CUDA GPU here (the compile-only "
                                "suite, test_cuda_compile.py, runs instead)")


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_matches_the_reference_on_the_gpu(name):
    case = CASES[name]
    with x64_mode(case.x64):
        args = case.args()
        got = ember.jit(case.fun, backend="cuda")(*args)
        want = ember.jit(case.fun, backend="reference")(*args)
        assert_trees_same(got, want, case.tolerance)
