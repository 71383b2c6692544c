"""Gather, dynamic slices, scatters and cumulative ops on the CUDA backend without a GPU:
every program of ``indexing_programs`` renders as CUDA C that NVRTC compiles for sm_90,
with no host call and the CPU backend's kernel boundaries."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import ember
from ember.backends.cuda.driver import gpus
from ember.backends.cuda.nvrtc import nvrtc_version
from ember.runtime.devices import available_backends

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "opencl"))
from gpu_programs import x64_mode  # noqa: E402
from indexing_programs import CASES, KERNEL_COUNTS, boundaries, compiled_on  # noqa: E402

pytestmark = [
    pytest.mark.skipif(nvrtc_version() is None, reason="NVRTC is not installed: pip install "
                       "'cuda-python>=13' 'nvidia-cuda-nvrtc>=13' (or 'ember[cuda]')"),
    pytest.mark.skipif(bool(gpus()), reason="a GPU is present: these test compile-only mode"),
]
_KERNEL_NAME = re.compile(r"__launch_bounds__\(\d+\) (\w+)\(")


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_compiles_for_sm_90_without_host_calls(name):
    case = CASES[name]
    with x64_mode(case.x64):
        compiled = ember.jit(case.fun, backend="cuda").lower(*case.args()).compile()
    ptx = compiled.executable.ptx
    for info in compiled.kernels:
        assert info.kind != "host", info.ops
        for kernel in _KERNEL_NAME.findall(info.source):
            assert f".entry {kernel}(" in ptx


@pytest.mark.parametrize("name", sorted(KERNEL_COUNTS))
def test_kernel_boundaries_are_the_cpu_backends(name):
    if "cpu" not in available_backends():
        pytest.skip("no C compiler: the CPU backend is absent")
    assert boundaries(compiled_on("cuda", name)) == boundaries(compiled_on("cpu", name))
