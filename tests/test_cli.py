"""The ``ember`` command: its usage and ``ember info``."""
from __future__ import annotations

from ember import cli
from ember.backends.cuda import cublas, nvrtc
from ember.runtime.devices import available_backends


def test_info_names_the_backends_compiler_blas_and_cuda(capsys):
    assert cli.main(["info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (backends,) = [line for line in lines if line.startswith("backends present:")]
    assert all(name in backends for name in available_backends())
    (cuda,) = [line for line in lines if line.startswith("CUDA:")]
    if nvrtc.nvrtc_version() is None:
        assert "NVRTC not installed" in cuda
    else:
        assert f"NVRTC {nvrtc.nvrtc_version()}" in cuda
        assert ("cuBLAS found" in cuda) == (cublas.load_library() is not None)


def test_an_unknown_command_prints_usage_and_fails(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert "usage: ember <command>" in capsys.readouterr().out
