"""The launcher is built in the background, at a low priority: executables run
without it until it is ready, then use it; at exit a build still running is stopped and
handed to a process of its own (background_build.py, which Ember's GEMM library is
built by too)."""
from __future__ import annotations

import os
import sysconfig
import threading
import time

import numpy as np
import pytest
from cpu_testing import requires_cpu

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_executable
from ember.backends.cpu import background_build, launcher
from ember.config import config
from ember.errors import CompileError

pytestmark = requires_cpu

x = np.linspace(-1, 1, 40, dtype=np.float32)


def test_the_launcher_is_built_once_and_then_ready():
    function = launcher.launcher()
    assert function is not None and launcher.ready_launcher() is function
    assert launcher.launcher() is function


def test_a_launcher_in_the_compile_cache_is_loaded_at_once_without_a_thread():
    launcher.launcher()  # built (or found) once
    build = launcher._new_build()
    build.start()
    assert build._thread is None and build.loaded is not None


def test_an_executable_runs_before_the_launcher_is_ready_and_uses_it_after(monkeypatch):
    ready = launcher.launcher()
    monkeypatch.setattr(cpu_executable, "ready_launcher", lambda: None)
    f = ember.jit(lambda a: jnp.exp(a) * 2.0, backend="cpu")
    compiled = f.lower(x).compile()
    executable = compiled.executable
    before = np.asarray(compiled(x))
    assert executable._launch is None and not executable._simple
    monkeypatch.undo()
    after = np.asarray(compiled(x))
    assert executable._launch is ready and executable._simple
    np.testing.assert_array_equal(before, after)
    np.testing.assert_allclose(after, np.exp(x) * 2.0, rtol=1e-6)


def test_the_launcher_compiles_at_a_low_priority_and_may_fail(monkeypatch):
    seen = []

    def compile_library(source, **kwargs):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        raise CompileError("no Python headers here")

    monkeypatch.setattr(launcher.toolchain, "find_shared_library", lambda *a, **k: None)
    monkeypatch.setattr(launcher.toolchain, "compile_shared_library", compile_library)
    priority = os.getpriority(os.PRIO_PROCESS, 0)
    assert launcher._new_build().wait() is None  # executables keep passing pointers from Python
    assert seen == [max(priority, background_build.BUILD_NICE)]
    assert os.getpriority(os.PRIO_PROCESS, 0) == priority


def test_at_exit_a_build_still_running_is_stopped_and_handed_off(monkeypatch, tmp_path):
    def slow_compile(source, **kwargs):
        [result] = launcher.toolchain._run_all([["sleep", "60"]], str(tmp_path))
        raise CompileError(f"stopped: {result.returncode}")

    monkeypatch.setattr(launcher.toolchain, "find_shared_library", lambda *a, **k: None)
    monkeypatch.setattr(launcher.toolchain, "compile_shared_library", slow_compile)
    monkeypatch.setattr(background_build, "EXIT_WAIT_S", 0.2)
    handed_off = []
    monkeypatch.setattr(background_build, "hand_off", lambda: handed_off.append(True))
    others = set(launcher.toolchain._running)  # (e.g. the real launcher, still building)
    for build_at_exit in (False, True):  # (off: the cache goes with the process)
        monkeypatch.setattr(launcher.toolchain, "_stopped", False)  # (the last one stopped)
        build = launcher._new_build()
        build.start()
        start = time.monotonic()
        with config.override(build_at_exit=build_at_exit):
            build._finish()
        assert not build._thread.is_alive() and time.monotonic() - start < 5
        assert build.loaded is None and set(launcher.toolchain._running) <= others
        assert handed_off == ([True] if build_at_exit else [])


def test_python_headers_are_found_where_sysconfig_says():
    assert launcher._python_include() == sysconfig.get_paths()["include"]


def test_the_launcher_runs_nothing_for_a_buffer_that_is_not_a_contiguous_array():
    launch = launcher.launcher()
    # (entry address 0: were it called, the process would crash)
    assert launch(0, [None, x[::2]], 0) is False
    assert launch(0, [None, [1.0, 2.0]], 0) is False
    with pytest.raises(TypeError, match="arrays: list"):
        launch(0, (None, x), 0)


def test_a_buffer_that_is_not_contiguous_is_made_so_before_the_call():
    launcher.launcher()
    compiled = ember.jit(lambda a: jnp.exp(a) * 2.0, backend="cpu").lower(x[::2]).compile()
    executable = compiled.executable
    assert executable._simple
    view = x[::2]
    [out] = executable.run([view])
    np.testing.assert_allclose(out, np.exp(view) * 2.0, rtol=1e-6)


def _addresses(*arrays):
    return [a.__array_interface__["data"][0] for a in arrays]


def test_a_program_called_with_addresses_matches_a_call_with_arrays():
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.linspace(0, 1, 4, dtype=np.float32)
    compiled = ember.jit(lambda p, q: (jnp.tanh(p) * q, (p @ q).sum())).lower(a, b).compile()
    launcher.launcher()  # (ready: call_addresses does not wait for it)
    results = compiled.call_addresses(_addresses(a, b))
    expected = compiled.call_host([a, b])
    assert len(results) == 2
    for got, want in zip(results, expected):
        assert got.flags.writeable and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)


def test_an_argument_returned_as_it_is_comes_back_as_none():
    a, b = np.ones(5, np.float32), np.full(5, 2.0, np.float32)
    compiled = ember.jit(lambda p, q: (q, p + q)).lower(a, b).compile()
    launcher.launcher()
    assert compiled.returned_arguments() == {0: 1}
    same, total = compiled.call_addresses(_addresses(a, b))
    assert same is None
    np.testing.assert_array_equal(total, a + b)


def test_programs_with_empty_inputs_or_nan_checks_take_no_addresses():
    empty = np.zeros((0, 3), np.float32)
    compiled = ember.jit(lambda p: p * 2).lower(empty).compile()
    assert compiled.call_addresses([0]) is None
    with config.override(debug_nans=True):
        full = ember.jit(lambda p: p * 3).lower(x).compile()
        assert full.call_addresses(_addresses(x)) is None
