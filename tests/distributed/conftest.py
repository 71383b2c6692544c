"""Helpers for tests that start processes through `ember launch` (mpirun underneath)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"


def needs_mpi() -> None:
    pytest.importorskip("mpi4py")
    from ember.distributed.launcher import find_mpirun

    try:
        find_mpirun()
    except SystemExit:
        pytest.skip("no mpirun (pip install 'ember[distributed]')")


def launch(processes: int, program: str, *args: str, devices: int = 1,
           timeout: float | None = None, deadline: float = 240,
           extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``programs/<program>`` in ``processes`` processes of ``devices`` devices."""
    command = [sys.executable, "-m", "ember", "launch", "-n", str(processes),
               "--devices-per-process", str(devices)]
    if timeout is not None:
        command += ["--timeout", str(timeout)]
    command += [str(PROGRAMS / program), *args]
    return subprocess.run(command, cwd=ROOT, env=_environment() | (extra_env or {}),
                          capture_output=True, text=True, timeout=deadline)


def run_ember(*args: str, deadline: float = 240) -> subprocess.CompletedProcess:
    """Run the command line ``ember <args>`` (outside any launch)."""
    return subprocess.run([sys.executable, "-m", "ember", *args], cwd=ROOT,
                          env=_environment(), capture_output=True, text=True,
                          timeout=deadline)


def run_alone(program: str, *args: str, devices: int = 1,
              extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``programs/<program>`` as one plain process (no launcher)."""
    env = _environment() | {"EMBER_NUM_CPU_DEVICES": str(devices)} | (extra_env or {})
    return subprocess.run([sys.executable, str(PROGRAMS / program), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240)


def run_layouts(folder: Path, program: str, layouts: dict[str, tuple[int, int]],
                args: dict[str, tuple[str, ...]] | None = None,
                keep_output: bool = False) -> dict[str, dict]:
    """Run ``programs/<program>`` once per layout, ``name -> (processes, devices per
    process)`` (one process alone, more through the launcher), with ``<name>.json`` in
    ``folder`` as its first argument and ``args[name]`` after it; the JSON each run
    wrote, by name (with the run's stdout as ``output`` if ``keep_output``)."""
    results = {}
    for name, (processes, devices) in layouts.items():
        out = str(folder / f"{name}.json")
        given = (out, *(args or {}).get(name, ()))
        done = (run_alone(program, *given, devices=devices) if processes == 1
                else launch(processes, program, *given, devices=devices))
        assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"
        with open(out) as handle:
            results[name] = json.load(handle)
        if keep_output:
            results[name]["output"] = done.stdout
    return results


def _environment() -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_", "EMBER_JOB_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def new_marker() -> str:
    return f"ember-test-{uuid.uuid4().hex}"


def processes_with(marker: str, wait: float = 15.0) -> list[int]:
    """Processes whose command line holds ``marker``, once they have had ``wait``
    seconds to end (a process that ended leaves nothing)."""
    end = time.monotonic() + wait
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if marker.encode() in (entry / "cmdline").read_bytes():
                        found.append(int(entry.name))
                except OSError:
                    continue
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.2)
