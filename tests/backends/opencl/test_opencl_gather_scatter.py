"""Gather, dynamic slices, scatters and cumulative ops on OpenCL (PoCL in CI) against the
reference backend, with the CPU backend's kernel boundaries (a scatter launches its
copy and its updates as two kernels of one step)."""
from __future__ import annotations

import pytest
from indexing_programs import KERNEL_COUNTS, boundaries, compiled_on
from opencl_marks import requires_opencl

from ember.runtime.devices import available_backends

pytestmark = requires_opencl

# The programs themselves run against the reference in test_opencl_differential.py.


@pytest.mark.parametrize("name", sorted(KERNEL_COUNTS))
def test_kernel_boundaries_are_the_cpu_backends(name):
    if "cpu" not in available_backends():
        pytest.skip("no C compiler: the CPU backend is absent")
    opencl = compiled_on("opencl", name)
    assert [k.kind for k in opencl.kernels] == ["kernel"]
    assert boundaries(opencl) == boundaries(compiled_on("cpu", name))


def test_a_scatter_copies_its_operand_then_runs_its_updates_in_a_second_kernel():
    compiled = compiled_on("opencl", "embedding_gradient")
    (info,) = compiled.kernels
    assert info.source.count("__kernel") == 2
    (step,) = compiled.executable.program.steps
    assert [launch.kernel for launch in step.launches] == ["fusion_0", "fusion_0_1"]
