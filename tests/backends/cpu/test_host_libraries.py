"""The per-host libraries (launcher, Ember's GEMM, the BLAS wrapper) are built once per
compile cache, even by scripts that exit before their background builds end: those hand
the work to ``python -m ember.backends.cpu.host_libraries``, which outlives them."""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

from cpu_testing import requires_cpu

from ember.backends.cpu import background_build, host_libraries
from ember.config import config
from ember.runtime.compile_cache import default_cache

pytestmark = requires_cpu


def _missing_in(env: dict) -> list[str]:
    """``host_libraries.missing()`` in a fresh process with ``env`` (this process's
    choices of BLAS are remembered per process)."""
    done = subprocess.run(
        [sys.executable, "-c", "import json; from ember.backends.cpu.host_libraries "
         "import missing; print(json.dumps(missing()))"],
        env=env, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _handed_off_command(monkeypatch) -> tuple[list[str], dict]:
    started = []

    class Recorded:
        def __init__(self, command, **options):
            started.append((command, options))

    monkeypatch.setattr(background_build, "_handed_off", False)
    with monkeypatch.context() as patched:
        patched.setattr(background_build.subprocess, "Popen", Recorded)
        background_build.hand_off()
        background_build.hand_off()  # (once per process)
    [(command, options)] = started
    assert options["start_new_session"] and options["stdout"] == subprocess.DEVNULL
    return command, options["env"]


def test_the_hand_off_passes_the_cache_and_settings_to_a_detached_process(monkeypatch, tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache"), blas="openblas", num_threads=1):
        command, env = _handed_off_command(monkeypatch)
        directory = str(default_cache().directory)
    assert command[1:] == ["-m", "ember.backends.cpu.host_libraries"]
    assert env["EMBER_CACHE_DIR"] == directory
    assert env["EMBER_BLAS"] == "openblas" and env["EMBER_NUM_THREADS"] == "1"


def test_the_handed_off_process_builds_every_per_host_library(monkeypatch):
    command, env = _handed_off_command(monkeypatch)  # (this session's private cache)
    subprocess.run(command, env=env, timeout=600, check=True)
    assert _missing_in(env) == []


def test_a_second_process_leaves_a_cache_being_prepared_alone(monkeypatch, tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache")):
        command, env = _handed_off_command(monkeypatch)
        lock = os.open(default_cache().directory / host_libraries.LOCK_NAME,
                       os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(command, env=env, timeout=600, check=True)
    finally:
        os.close(lock)
    assert not list((tmp_path / "cache").glob("*/*.so"))  # it built nothing
    assert "launcher" in _missing_in(env)


def test_ember_prepare_builds_them_in_the_foreground(capsys):
    from ember import cli

    assert cli.main(["prepare"]) == 0
    assert "per-host libraries ready in" in capsys.readouterr().out
    assert host_libraries.missing() == []


def test_ember_prepare_names_what_it_lacks_without_a_traceback(monkeypatch, capsys):
    from ember import cli
    from ember.errors import BackendUnavailableError

    def no_blas():
        raise BackendUnavailableError("this kernel calls BLAS, which needs the mkl wheel")

    monkeypatch.setattr(host_libraries, "prepare", no_blas)
    assert cli.main(["prepare"]) == 1
    assert "ember prepare: this kernel calls BLAS, which needs the mkl wheel" in \
        capsys.readouterr().err
