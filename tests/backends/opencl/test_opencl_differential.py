"""Every program of the GPU suites (gpu_programs, indexing_programs), jitted on 'opencl'
(PoCL in CI) vs the reference backend."""
from __future__ import annotations

import pytest
from opencl_marks import requires_opencl
from gpu_programs import CASES as GPU_CASES
from gpu_programs import assert_trees_same, x64_mode
from indexing_programs import CASES as INDEXING_CASES

import ember

pytestmark = requires_opencl

CASES = {**GPU_CASES, **INDEXING_CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_matches_the_reference(name):
    case = CASES[name]
    with x64_mode(case.x64):
        args = case.args()
        got = ember.jit(case.fun, backend="opencl")(*args)
        want = ember.jit(case.fun, backend="reference")(*args)
        assert_trees_same(got, want, case.tolerance)
