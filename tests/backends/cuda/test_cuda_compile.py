"""The CUDA backend without a GPU: every program of the GPU suite is rendered as CUDA C
and compiled by NVRTC for sm_90 (compile-only mode); running says "no CUDA device".

(The programs are the OpenCL suite's; on a machine with a GPU the CUDA backend lists its
devices and the backend-parametrized suites run on it instead.)"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import lax
from ember.backends.cuda.driver import gpus
from ember.backends.cuda.nvrtc import nvrtc_version
from ember.errors import BackendUnavailableError
from ember.runtime.compile_cache import default_cache
from ember.runtime.devices import available_backends, get_backend

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "opencl"))
from gpu_programs import CASES, FUSION_CASES, softmax, x64_mode  # noqa: E402

pytestmark = [
    pytest.mark.skipif(nvrtc_version() is None, reason="NVRTC is not installed: pip install "
                       "'cuda-python>=13' 'nvidia-cuda-nvrtc>=13' (or 'ember[cuda]')"),
    pytest.mark.skipif(bool(gpus()), reason="a GPU is present: these test compile-only mode"),
]
_KERNEL_NAME = re.compile(r"__launch_bounds__\(\d+\) (\w+)\(")


def compile_for_cuda(name: str):
    case = CASES[name]
    with x64_mode(case.x64):
        return ember.jit(case.fun, backend="cuda").lower(*case.args()).compile()


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_program_compiles_for_sm_90(name):
    compiled = compile_for_cuda(name)
    executable = compiled.executable
    assert executable.arch == "sm_90"
    assert executable.cubin[:4] == b"\x7fELF"
    assert ".target sm_90" in executable.ptx
    for info in compiled.kernels:
        names = _KERNEL_NAME.findall(info.source)
        assert bool(names) == (info.kind != "host"), info.source
        for kernel in names:
            assert f".entry {kernel}(" in executable.ptx


@pytest.mark.parametrize("name", FUSION_CASES)
def test_kernel_boundaries_are_the_cpu_backends(name):
    if "cpu" not in available_backends():
        pytest.skip("no C compiler: the CPU backend is absent")
    case = CASES[name]
    cpu = ember.jit(case.fun, backend="cpu").lower(*case.args()).compile()
    cuda = compile_for_cuda(name)
    assert [(k.kind, k.ops) for k in cuda.kernels] == [(k.kind, k.ops) for k in cpu.kernels]


def test_calling_a_compiled_program_says_there_is_no_cuda_device():
    x = np.ones((4, 8), np.float32)
    compiled = ember.jit(softmax, backend="cuda").lower(x).compile()
    with pytest.raises(BackendUnavailableError, match="no CUDA device"):
        compiled(x)
    with pytest.raises(BackendUnavailableError, match="no CUDA device"):
        ember.jit(softmax, backend="cuda")(x)


def test_without_a_gpu_cuda_lists_no_device_but_compiles():
    assert ember.devices("cuda") == []
    assert "cuda" not in available_backends()
    assert get_backend("cuda").default_device().description.startswith("no CUDA device")


def test_arrays_on_the_compile_only_device_cannot_be_computed_with():
    x = ember.device_put(np.arange(3, dtype=np.float32), "cuda")
    np.testing.assert_array_equal(np.asarray(x), [0, 1, 2])  # still in host memory
    with pytest.raises(BackendUnavailableError, match="no CUDA device"):
        lax.neg(x)


def test_compiled_binaries_come_from_the_cache_the_second_time():
    x = np.ones((5, 9), np.float32)
    ember.jit(softmax, backend="cuda").lower(x).compile()
    stats = default_cache().stats
    hits = stats.memory_hits + stats.disk_hits
    again = ember.jit(softmax, backend="cuda").lower(x).compile()
    assert stats.memory_hits + stats.disk_hits >= hits + 2  # the PTX and the cubin
    assert again.executable.cubin[:4] == b"\x7fELF"


def test_row_reductions_use_warp_shuffles_and_elementwise_kernels_a_grid_stride_loop():
    x = np.ones((64, 300), np.float32)
    (row,) = ember.jit(softmax, backend="cuda").lower(x).compile().kernels
    assert "ember_shfl_down" in row.source and "__syncthreads();" in row.source
    assert "o0 += (int)(gridDim.x)" in row.source  # a block per row
    # a row over the block's threads
    assert re.search(r"for \(int (\w+) = tid; \1 < 300; \1 \+= 256\)", row.source)
    (flat,) = ember.jit(lambda v: v * 2 + 1, backend="cuda").lower(x).compile().kernels
    assert "(int)(blockIdx.x) * 256 + tid" in flat.source
    assert "+= (int)(gridDim.x) * 256" in flat.source
