"""The compiler pipeline: one stage list per backend, run by one driver that checks,
times and dumps every stage (``EMBER_DUMP``: one folder per program, one file per stage)."""
from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu.backend import CpuTarget
from ember.child_process import environment
from ember.compiler import checks, pipeline
from ember.compiler.pipeline import PIPELINES, Stage, stage_names
from ember.config import Config
from ember.ir.verifier import VerificationError
from ember.runtime.devices import available_backends, get_backend

REPO_ROOT = Path(__file__).resolve().parents[2]
CODEGEN = ["absorb_into_contractions", "fusion", "kernel_ir"]
BUILD = ["source", "binary", "executable"]
x = np.linspace(-1, 1, 8 * 16, dtype=np.float32).reshape(8, 16)
w = np.linspace(1, -1, 16 * 32, dtype=np.float32).reshape(16, 32)
requires_cpu = pytest.mark.skipif("cpu" not in available_backends(), reason="no C compiler")


def softmax_of_product(a, b):
    y = a @ b
    e = jnp.exp(y - jnp.max(y, axis=1, keepdims=True))
    return e / jnp.sum(e, axis=1, keepdims=True)


def test_every_backend_lists_its_stages_in_one_place():
    assert stage_names("reference") == ["graph_passes"]
    assert stage_names("cpu") == ["graph_passes", *CODEGEN, "buffer_plan", *BUILD]
    assert stage_names("opencl") == stage_names("cuda") == ["graph_passes", *CODEGEN, *BUILD]


def _dumped(tmp_path: Path, backend: str, compile_it) -> dict[str, str]:
    """The files of the one program folder ``compile_it`` dumps, by name less number."""
    with ember.config.override(dump_dir=str(tmp_path)):
        compile_it()
    folders = [p for p in tmp_path.iterdir() if p.name.endswith(f"softmax_of_product.{backend}")]
    assert len(folders) == 1, sorted(p.name for p in tmp_path.iterdir())
    assert re.fullmatch(r"\d{4}-softmax_of_product\." + backend, folders[0].name)
    names = sorted(p.name for p in folders[0].iterdir())
    assert [n[:4] for n in names] == [f"{i:04d}" for i in range(len(names))]  # in stage order
    return {n[5:]: (folders[0] / n).read_text() for n in names}


def _check_stage_files(files: dict[str, str], suffix: str, build_word: str) -> None:
    stage_files = [n for n in files if not n.startswith(("input", "after-"))]
    expected = ["absorb_into_contractions.txt", "schedule.txt", "kernel_ir.txt"]
    if suffix == ".c":
        expected.append("buffer_plan.txt")
    assert stage_files == [*expected, f"source{suffix}", "build_command.txt"]
    assert "exp " in files["input.txt"] and "dot_general" in files["input.txt"]
    assert files["schedule.txt"].startswith("schedule: ") and "fusion_" in files["schedule.txt"]
    kernel_ir = files["kernel_ir.txt"]
    assert re.search(r"^kernel fusion_\d+\(b0: float32\[", kernel_ir, re.M)
    assert "exp(" in kernel_ir and "store b" in kernel_ir and "loop " in kernel_ir
    assert build_word in files["build_command.txt"]
    name = re.search(r"(ember_[0-9a-f]{12})" + re.escape(suffix), files["build_command.txt"])
    assert name is not None  # the command names the dumped source's program


@requires_cpu
def test_cpu_dumps_every_stage_in_one_folder(tmp_path):
    files = _dumped(tmp_path, "cpu",
                    lambda: ember.jit(softmax_of_product, backend="cpu")(x, w))
    _check_stage_files(files, ".c", " -o ")
    assert "void run(" in files["source.c"]
    assert files["buffer_plan.txt"].startswith("arena: ")
    assert "output #0" in files["buffer_plan.txt"]


@pytest.mark.skipif("opencl" not in available_backends(), reason="no OpenCL device")
def test_opencl_dumps_every_stage_in_one_folder(tmp_path):
    files = _dumped(tmp_path, "opencl",
                    lambda: ember.jit(softmax_of_product, backend="opencl")(x, w))
    _check_stage_files(files, ".cl", "clBuildProgram")
    assert "__kernel" in files["source.cl"]


def test_cuda_dumps_every_stage_in_one_folder_without_a_gpu(tmp_path):
    if not get_backend("cuda").is_available():
        pytest.skip("NVRTC is not installed (pip install 'ember[cuda]')")
    files = _dumped(tmp_path, "cuda", lambda: ember.jit(
        softmax_of_product, backend="cuda").lower(x, w).compile())
    _check_stage_files(files, ".cu", "--gpu-architecture=sm_")
    assert "__global__" in files["source.cu"]


@requires_cpu
def test_the_readme_dump_command_writes_the_stages(tmp_path):
    """README's miscompile report step, as written there: ``EMBER_DUMP=<dir>``."""
    readme = (REPO_ROOT / "README.md").read_text()
    variable = re.search(r"Run with `(EMBER_\w+)=", readme).group(1)
    script = ("import numpy as np, ember, ember.numpy as jnp\n"
              "ember.jit(lambda a: jnp.cos(a) + 3.0, backend='cpu')(np.ones(4, np.float32))\n")
    env = environment(**{variable: str(tmp_path / "dump")})
    env.pop("EMBER_DUMP_DIR", None)
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=tmp_path,
                   timeout=300)
    (folder,) = (tmp_path / "dump").iterdir()
    names = [p.name[5:] for p in sorted(folder.iterdir())]
    assert {"schedule.txt", "kernel_ir.txt", "source.c", "build_command.txt"} <= set(names)


@pytest.mark.parametrize("variable", ["EMBER_DUMP", "EMBER_DUMP_DIR"])
def test_the_dump_folder_is_read_from_either_variable(monkeypatch, tmp_path, variable):
    monkeypatch.delenv("EMBER_DUMP", raising=False)
    monkeypatch.delenv("EMBER_DUMP_DIR", raising=False)
    monkeypatch.setenv(variable, str(tmp_path))
    assert Config().dump_dir == str(tmp_path)


@requires_cpu
def test_compile_log_times_every_stage(capsys, tmp_path):
    with ember.config.override(log="compile", cache_dir=str(tmp_path)):  # (no cache hit)
        ember.jit(softmax_of_product, backend="cpu")(x, w)
    timed = re.findall(r"^ember: stage (\w+) \(cpu\) in \d+\.\d{4} s$", capsys.readouterr().err,
                       re.M)
    assert timed == stage_names("cpu")


def _broken(backend: str, stage_name: str, breaks) -> list[Stage]:
    """``backend``'s stages, ``stage_name`` breaking what it made with ``breaks``."""
    def run(stage: Stage):
        def broken_stage(program):
            return breaks(stage.run(program))
        broken_stage.__name__ = stage.name
        return dataclasses.replace(stage, run=broken_stage)
    return [run(s) if s.name == stage_name else s for s in PIPELINES[backend]]


def _drop_first_group(schedule):
    return dataclasses.replace(schedule, groups=schedule.groups[1:])


def _unbind_kernels(steps):
    for step in steps:
        if step.kernel is not None:
            step.bindings = {}
    return steps


def _forget_buffers(plan):
    return dataclasses.replace(plan, locations={})


@pytest.mark.parametrize("stage_name, breaks, message", [
    ("fusion", _drop_first_group, "no earlier group writes"),
    ("kernel_ir", _unbind_kernels, "bound to no value"),
    ("buffer_plan", _forget_buffers, "reads a value with no buffer"),
])
def test_the_check_after_each_stage_names_the_stage(monkeypatch, stage_name, breaks, message):
    monkeypatch.setitem(PIPELINES, "cpu", _broken("cpu", stage_name, breaks))
    graph = ember.jit(softmax_of_product).lower(x, w).graph
    with ember.config.override(verify=True):
        with pytest.raises(VerificationError, match=f"after stage {stage_name}: .*{message}"):
            pipeline.compile_program(graph, "cpu", CpuTarget(lambda g: None), until=stage_name)


def test_the_checks_accept_what_the_stages_make():
    graph = ember.jit(softmax_of_product).lower(x, w).graph
    program = pipeline.compile_program(graph, "cpu", CpuTarget(lambda g: None),
                                       until="buffer_plan")
    checks.check_schedule(program.schedule)
    checks.check_kernels(program.steps)
    checks.check_plan(program.plan, program.steps)
    assert len(program.steps) >= 2 and program.source is None  # (stopped at buffer_plan)


def test_no_gpu_backend_module_imports_the_cpu_backend():
    import ast

    folder = REPO_ROOT / "ember" / "backends"
    for package in ("gpu", "cuda", "opencl"):
        for path in sorted((folder / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                assert not any(n.startswith("ember.backends.cpu") for n in names), path
