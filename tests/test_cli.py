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


def test_info_pipeline_lists_the_stages_of_a_backend(capsys):
    from ember.compiler.pipeline import stage_names
    from ember.passes.pipeline import GRAPH_PIPELINES

    for backend in ("cpu", "opencl", "cuda", "reference"):
        assert cli.main(["info", "--pipeline", backend]) == 0
        note, *lines = capsys.readouterr().out.splitlines()
        assert "partitioned first" in note
        stages = [line.split(". ", 1)[1] for line in lines if not line.startswith("   - ")]
        assert stages == stage_names(backend)
        passes = [line[5:] for line in lines if line.startswith("   - ")]
        assert passes == [p.__name__ for p in GRAPH_PIPELINES[backend]]
    assert cli.main(["info", "--pipeline"]) == 0  # (the CPU's)
    assert "buffer_plan" in capsys.readouterr().out


def test_info_pipeline_of_an_unknown_backend_fails(capsys):
    assert cli.main(["info", "--pipeline", "tpu"]) == 2
    assert "pipelines: cpu, cuda, opencl, reference" in capsys.readouterr().err
