"""Every program of the GPU suite, jitted on 'opencl' (PoCL in CI) vs the reference backend."""
from __future__ import annotations

import pytest
from opencl_marks import requires_opencl
from gpu_programs import CASES, assert_trees_same, x64_mode

import ember

pytestmark = requires_opencl


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_matches_the_reference(name):
    case = CASES[name]
    with x64_mode(case.x64):
        args = case.args()
        got = ember.jit(case.fun, backend="opencl")(*args)
        want = ember.jit(case.fun, backend="reference")(*args)
        assert_trees_same(got, want, case.tolerance)
