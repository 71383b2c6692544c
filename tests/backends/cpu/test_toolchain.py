"""The CPU toolchain: finding the compiler, compiling through the cache, loading with
ctypes, compiler errors, BLAS linking."""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ember.backends.cpu import toolchain
from ember.child_process import environment
from ember.config import config
from ember.errors import BackendUnavailableError, CompileError
from ember.runtime import compile_cache
from ember.runtime.compile_cache import default_cache

REPO_ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(toolchain.find_toolchain() is None, reason="no C compiler on this machine")

ADD_SOURCE = """
int add(int a, int b) { return a + b; }
void scale(float *x, long n, float factor) {
    for (long i = 0; i < n; ++i) x[i] *= factor;
}
"""


@pytest.fixture
def cache_dir(tmp_path):
    directory = tmp_path / "cache"
    saved = config.cache_dir
    config.update("cache_dir", str(directory))
    yield directory
    config.update("cache_dir", saved)


def test_toolchain_description():
    found = toolchain.find_toolchain()
    assert os.path.isabs(found.cc) and os.access(found.cc, os.X_OK)
    assert found.version and "\n" not in found.version
    triple = subprocess.run([found.cc, "-dumpmachine"], capture_output=True, text=True).stdout.strip()
    assert found.target_isa.startswith(triple)
    for flag in ("-O3", "-march=native", "-fPIC", "-shared", "-std=c11",
                 "-fno-math-errno", "-fno-trapping-math"):
        assert flag in found.base_flags
    assert "-ffast-math" not in found.base_flags
    assert ("-fopenmp" in found.base_flags) == found.openmp
    assert toolchain.find_toolchain() is found  # probed once


def test_flags_follow_sanitize_and_cflags():
    with config.override(sanitize="address,undefined", cflags="-DEMBER_TEST='a b' -g"):
        flags = toolchain.find_toolchain().base_flags
    assert flags[-5:] == ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1",
                          "-DEMBER_TEST=a b", "-g")
    assert "-fsanitize=address,undefined" not in toolchain.find_toolchain().base_flags


def test_compile_load_and_call(cache_dir):
    path = toolchain.compile_shared_library(ADD_SOURCE, name="add")
    assert path.suffix == ".so" and path.is_relative_to(cache_dir)
    library = toolchain.load_library(path)
    assert library.add(2, 40) == 42
    values = np.arange(5, dtype=np.float32)
    library.scale(values.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(5), ctypes.c_float(2.5))
    np.testing.assert_array_equal(values, np.arange(5, dtype=np.float32) * 2.5)
    assert toolchain.load_library(path) is library


def _crashing_compiler(tmp_path: Path, cc: str, crashes_without: str) -> str:
    """A compiler that reports an internal compiler error unless given ``crashes_without``."""
    script = tmp_path / "crashing-cc"
    script.write_text(f"""#!/bin/sh
case " $* " in *" {crashes_without} "*) exec {cc} "$@";; esac
echo "kernel.c:1:1: internal compiler error: in convert_mode_scalar" >&2
exit 1
""")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("survives", [True, False])
def test_a_compiler_crash_rebuilds_once_unvectorized(cache_dir, tmp_path, survives):
    # (GCC 12 crashes vectorizing some small reductions for AVX-512: the compiler's bug)
    cc = toolchain.find_toolchain().cc
    flag = "-fno-tree-vectorize" if survives else "-fno-such-flag-passed"
    crashing = _crashing_compiler(tmp_path, cc, flag)
    output = tmp_path / "add.so"
    flags = ["-O2", "-fPIC", "-shared"]
    if survives:
        toolchain._run_compiler(crashing, [ADD_SOURCE], "add", flags, [], output)
        assert toolchain.load_library(output).add(2, 40) == 42
    else:
        with pytest.raises(CompileError, match="internal compiler error"):
            toolchain._run_compiler(crashing, [ADD_SOURCE], "add", flags, [], output)


def test_second_compile_in_process_skips_the_compiler(cache_dir, monkeypatch):
    first = toolchain.compile_shared_library(ADD_SOURCE, name="add")
    stats = default_cache().stats
    assert (stats.disk_misses, stats.memory_hits) == (1, 0)

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler must not run on a cache hit")

    monkeypatch.setattr(toolchain, "_run_compiler", no_compiler)
    assert toolchain.compile_shared_library(ADD_SOURCE, name="add") == first
    assert (stats.disk_misses, stats.memory_hits) == (1, 1)


def test_everything_that_changes_the_binary_changes_the_key(cache_dir):
    base = toolchain.compile_shared_library(ADD_SOURCE, name="add")
    assert toolchain.compile_shared_library(ADD_SOURCE, name="renamed") == base
    assert toolchain.compile_shared_library(ADD_SOURCE + "\n", name="add") != base
    assert toolchain.compile_shared_library(ADD_SOURCE, name="add", extra_flags=["-DX=1"]) != base
    with config.override(cflags="-fno-unroll-loops"):
        assert toolchain.compile_shared_library(ADD_SOURCE, name="add") != base


CHILD = """
import json, sys
from ember.backends.cpu import toolchain
from ember.child_process import environment
from ember.runtime import compile_cache
from ember.runtime.compile_cache import default_cache
toolchain.find_toolchain()  # (first: the compiler probes are entries of the cache too)
stats = default_cache().stats
hits, misses = stats.disk_hits, stats.disk_misses
path = toolchain.compile_shared_library(sys.argv[1], name="add")
print(json.dumps({"path": str(path), "disk_hits": stats.disk_hits - hits,
                  "disk_misses": stats.disk_misses - misses,
                  "sum": toolchain.load_library(path).add(1, 2)}))
"""


def test_another_process_finds_the_artifact_on_disk(cache_dir):
    path = toolchain.compile_shared_library(ADD_SOURCE, name="add")
    env = environment(EMBER_CACHE_DIR=str(cache_dir))
    child = subprocess.run([sys.executable, "-c", CHILD, ADD_SOURCE], capture_output=True,
                           text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report == {"path": str(path), "disk_hits": 1, "disk_misses": 0, "sum": 3}


UNITS = ["int twice(int a);\nint add_twice(int a, int b) { return twice(a) + b; }\n",
         "int twice(int a) { return 2 * a; }\n"]


def test_several_units_are_compiled_and_linked_into_one_library(cache_dir):
    path = toolchain.compile_shared_library(UNITS, name="units")
    assert toolchain.load_library(path).add_twice(20, 2) == 42
    assert toolchain.compile_shared_library(UNITS, name="units") == path
    assert toolchain.compile_shared_library(["".join(UNITS)], name="units") != path
    assert toolchain.compile_shared_library(ADD_SOURCE, name="add") == \
        toolchain.compile_shared_library([ADD_SOURCE], name="add")


def test_find_returns_only_what_compile_built(cache_dir):
    assert toolchain.find_shared_library(UNITS, name="units") is None
    path = toolchain.compile_shared_library(UNITS, name="units")
    assert toolchain.find_shared_library(UNITS, name="renamed") == path
    assert toolchain.find_shared_library(UNITS, name="units", extra_flags=["-DX"]) is None


def test_a_unit_the_compiler_rejects_is_saved_and_named(cache_dir):
    broken = "int broken(int a) { return a + }\n"
    with pytest.raises(CompileError) as caught:
        toolchain.compile_shared_library([UNITS[0], broken], name="split")
    message = str(caught.value)
    assert Path(re.search(r"source: (\S+)", message).group(1)).read_text() == broken
    assert "split.1.c" in message and "expected" in message


def test_a_stopped_compiler_is_an_error_but_no_bug_report(cache_dir, monkeypatch):
    def killed(commands, cwd):
        return [subprocess.CompletedProcess(c, -9, "", "") for c in commands]

    monkeypatch.setattr(toolchain, "_run_all", killed)
    with pytest.raises(CompileError, match="stopped"):
        toolchain.compile_shared_library(ADD_SOURCE, name="add")
    assert not (cache_dir / "failed").exists()


def test_build_command_spells_out_the_compiler_calls():
    lines = toolchain.build_command(UNITS, name="units").splitlines()
    assert [line.split(" -o ")[1].split()[0] for line in lines] == ["units.0.o", "units.1.o",
                                                                      "units.so"]
    assert " -c units.0.c " in lines[0] and " units.0.o units.1.o " in lines[2]
    single = toolchain.build_command(ADD_SOURCE, name="kernels/add")
    assert " kernels_add.c -o kernels_add.so" in single and "\n" not in single


def test_blas_is_located_without_importing_it():
    with config.override(blas="openblas"):
        info = toolchain.blas()
    if info is None:
        pytest.skip("scipy-openblas32 is not installed (pip install scipy-openblas32)")
    import scipy_openblas32

    assert info.name == "openblas" and info.compile_flags == ()
    assert info.lib_dir == str(Path(scipy_openblas32.get_lib_dir()).resolve())
    assert info.version == f"scipy-openblas32 {scipy_openblas32.__version__}"


def test_mkl_is_opened_at_load_not_linked():
    info = toolchain._mkl()
    if info is None:
        pytest.skip("mkl is not installed (pip install mkl)")
    define = next(flag for flag in info.compile_flags if flag.startswith("-DEMBER_MKL_RT="))
    library = Path(json.loads(define.split("=", 1)[1]))
    assert library.name.startswith("libmkl_rt.so.") and library.is_file()
    assert "-DEMBER_BLAS_MKL" in info.compile_flags and info.link_flags == ("-ldl",)


def test_mkl_that_does_not_load_is_ignored(tmp_path, monkeypatch):
    (tmp_path / "env" / "lib").mkdir(parents=True)
    (tmp_path / "env" / "lib" / "libmkl_rt.so.3").write_bytes(b"not a library")
    for attribute in ("prefix", "base_prefix"):
        monkeypatch.setattr(sys, attribute, str(tmp_path / "env"))
    assert toolchain._mkl() is None


@pytest.mark.parametrize("mkl_installed, choice, expected", [
    (True, "openblas", "openblas"), (True, "mkl", "mkl"), (False, "mkl", None)])
def test_blas_choice(monkeypatch, mkl_installed, choice, expected):
    def fake(name):
        return toolchain.BlasInfo(name, "/lib", (), (), name)

    monkeypatch.setattr(toolchain, "_mkl", lambda: fake("mkl") if mkl_installed else None)
    monkeypatch.setattr(toolchain, "_openblas", lambda: fake("openblas"))
    toolchain._find_blas.cache_clear()
    try:
        with config.override(blas=choice):
            found = toolchain.blas()
            assert (found.name if found else None) == expected
            if expected is None:
                with pytest.raises(BackendUnavailableError, match="pip install mkl"):
                    toolchain.compile_shared_library(ADD_SOURCE, name="add", link_blas=True)
    finally:
        toolchain._find_blas.cache_clear()


def test_unknown_blas_is_an_error():
    with config.override(blas="atlas"), pytest.raises(ValueError, match="openblas, mkl"):
        toolchain.blas()


def test_syntax_error_raises_compile_error_with_source_and_message(cache_dir):
    source = "int broken(int a) { return a + }\n"
    with pytest.raises(CompileError) as caught:
        toolchain.compile_shared_library(source, name="fused/kernel 7")
    message = str(caught.value)
    assert "fused/kernel 7" in message
    saved = Path(re.search(r"source: (\S+)", message).group(1))
    assert saved.read_text() == source
    assert saved.parent == cache_dir / "failed"
    assert "error" in message and "expected" in message  # the compiler's diagnosis
    assert "return a + }" in message  # and its excerpt of the line
    assert default_cache().stats.disk_misses == 0  # nothing was cached


def test_compile_log(cache_dir, capsys):
    with config.override(log="compile"):
        toolchain.compile_shared_library(ADD_SOURCE, name="logged_add")
        toolchain.compile_shared_library(ADD_SOURCE, name="logged_add")  # cache hit: no line
    lines = capsys.readouterr().err.splitlines()
    assert len([line for line in lines if line.startswith("ember: cc")]) == 1
    assert re.fullmatch(r"ember: cc logged_add \d+\.\d{3} s", lines[-1])


def test_bundled_header_is_on_the_include_path(cache_dir):
    source = '#include "ember_math.h"\nfloat e(float x) { return ember_expf(x); }\n'
    library = toolchain.load_library(toolchain.compile_shared_library(source, name="header"))
    library.e.restype = ctypes.c_float
    library.e.argtypes = [ctypes.c_float]
    assert library.e(0.0) == 1.0


def test_no_compiler_is_reported(cache_dir, monkeypatch):
    monkeypatch.setattr(toolchain, "find_toolchain", lambda: None)
    with pytest.raises(BackendUnavailableError, match="C compiler"):
        toolchain.compile_shared_library(ADD_SOURCE, name="add")


def test_missing_blas_is_reported(cache_dir, monkeypatch):
    monkeypatch.setattr(toolchain, "blas", lambda: None)
    with pytest.raises(BackendUnavailableError, match="scipy-openblas32"):
        toolchain.compile_shared_library(ADD_SOURCE, name="add", link_blas=True)


GEMM_SOURCE = """
#include "ember_blas.h"
void gemm(int m, int n, int k, const float *a, const float *b, float *c) {
    EMBER_CBLAS(sgemm)(101, 111, 111, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
"""


@pytest.mark.parametrize("choice", ["openblas", "mkl"])
def test_blas_sgemm_matches_numpy(cache_dir, choice):
    with config.override(blas=choice):
        if toolchain.blas() is None:
            pytest.skip(f"the {choice} BLAS is not installed")
        library = toolchain.load_library(
            toolchain.compile_shared_library(GEMM_SOURCE, name="gemm", link_blas=True))
    rng = np.random.default_rng(0)
    m, n, k = 67, 45, 129
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), dtype=np.float32)
    pointer = ctypes.c_void_p
    library.gemm(m, n, k, a.ctypes.data_as(pointer), b.ctypes.data_as(pointer), c.ctypes.data_as(pointer))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


BLAS_THREADS_CHILD = """
import json, os, sys
from ember.backends.cpu import toolchain
from ember.child_process import environment
path = toolchain.compile_shared_library(sys.argv[1], name="gemm", link_blas=True)
before = len(os.listdir("/proc/self/task"))
toolchain.load_library(path)
print(json.dumps({"new_threads": len(os.listdir("/proc/self/task")) - before,
                  "env": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


@pytest.mark.parametrize("user_setting", [None, "2"])
def test_openblas_starts_no_thread_of_its_own_unless_asked(cache_dir, user_setting):
    if toolchain._openblas() is None or not os.path.isdir("/proc/self/task"):
        pytest.skip("needs scipy-openblas32 and /proc")
    env = environment(EMBER_CACHE_DIR=str(cache_dir))
    env.pop("OPENBLAS_NUM_THREADS", None)
    env["EMBER_BLAS"] = "openblas"
    if user_setting is not None:
        env["OPENBLAS_NUM_THREADS"] = user_setting
    child = subprocess.run([sys.executable, "-c", BLAS_THREADS_CHILD, GEMM_SOURCE], check=False,
                           capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report == {"new_threads": 0 if user_setting is None else 1, "env": user_setting}


PROBE_CHILD = """
import json
from ember.backends.cpu import toolchain
from ember.child_process import environment
found = toolchain.find_toolchain()
print(json.dumps({"runs": toolchain.probe_stats.runs, "disk_hits": toolchain.probe_stats.disk_hits,
                  "version": found.version, "target_isa": found.target_isa, "openmp": found.openmp}))
"""


def _probe_in_child(cache_dir):
    env = environment(EMBER_CACHE_DIR=str(cache_dir))
    child = subprocess.run([sys.executable, "-c", PROBE_CHILD], capture_output=True,
                           text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_a_second_process_reuses_the_compiler_probes(cache_dir):
    found = toolchain.find_toolchain()
    expected = {"version": found.version, "target_isa": found.target_isa, "openmp": found.openmp}
    first = _probe_in_child(cache_dir)
    assert first == {**expected, "runs": 1, "disk_hits": 0}
    assert len(list(cache_dir.glob("??/*.probe"))) == 1
    second = _probe_in_child(cache_dir)
    assert second == {**expected, "runs": 0, "disk_hits": 1}


def _fresh_probe(cc):
    runs, hits = toolchain.probe_stats.runs, toolchain.probe_stats.disk_hits
    result = toolchain._probe.__wrapped__(cc)  # past the in-process lru_cache
    return result, toolchain.probe_stats.runs - runs, toolchain.probe_stats.disk_hits - hits


@pytest.mark.parametrize("damage", ["garbage", "truncated", "tampered", "wrong_types", "empty"])
def test_a_damaged_probe_entry_is_probed_again(cache_dir, damage):
    cc = toolchain.find_toolchain().cc
    expected, runs, hits = _fresh_probe(cc)
    assert (runs, hits) == (1, 0)
    assert _fresh_probe(cc) == (expected, 0, 1)
    [entry] = cache_dir.glob("??/*.probe")
    text = entry.read_text()
    data = json.loads(text)
    if damage == "garbage":
        entry.write_bytes(b"\x00\xffnot json")
    elif damage == "truncated":
        entry.write_text(text[: len(text) // 2])
    elif damage == "tampered":  # valid JSON, but the content hash no longer matches
        entry.write_text(json.dumps([data[0], "x86_64-linux-gnu planted", data[2]]))
    elif damage == "wrong_types":  # what a valid entry of another layout could hold
        entry.write_text(json.dumps({"version": data[0]}))
        entry.with_suffix(".sha256").write_text(
            hashlib.sha256(entry.read_bytes()).hexdigest())
    else:
        entry.write_text("")
    compile_cache._default_cache = None  # as in a later process: nothing checked yet
    assert _fresh_probe(cc) == (expected, 1, 0)
    assert json.loads(entry.read_text()) == data  # rewritten, valid again
    assert _fresh_probe(cc) == (expected, 0, 1)


def test_probe_key_follows_the_compiler_and_the_cpu(monkeypatch):
    cc = toolchain.find_toolchain().cc
    key = toolchain._probe_key(cc)
    assert key is not None and key == toolchain._probe_key(cc)
    monkeypatch.setenv("LIBRARY_PATH", os.environ.get("LIBRARY_PATH", "") + ":/elsewhere")
    assert toolchain._probe_key(cc) != key
    monkeypatch.undo()
    monkeypatch.setattr(toolchain, "_cpu_identity", lambda: "model name : another cpu")
    assert toolchain._probe_key(cc) not in (key, None)
    monkeypatch.setattr(toolchain, "_cpu_identity", lambda: None)
    assert toolchain._probe_key(cc) is None  # unknown CPU: probe every time, store nothing


def test_cpu_flags_are_those_of_the_first_processor():
    if toolchain._cpu_identity() is None:
        pytest.skip("no /proc/cpuinfo")
    with open("/proc/cpuinfo") as file:
        line = next(line for line in file if line.split(":")[0].strip() in ("flags", "Features"))
    assert toolchain.cpu_flags() == frozenset(line.split(":", 1)[1].split())
