"""Failures never hang: a process that raises, is killed mid-step, exits early, runs
another shape or stalls makes the others raise an error naming it, and every process
of the job ends; a wrong coordinator is a clear error. The mismatch job joins through
an explicit coordinator (initialize(coordinator_address=...)) to test that path too."""
from __future__ import annotations

import socket

import pytest

from tests.distributed.conftest import (
    launch, needs_mpi, new_marker, processes_with, run_alone)

CASES = {
    "raise": "rank 1 failed (ValueError: boom on purpose)",
    "kill": "rank 1 died",
    "exit": "rank 1 exited after 1 collectives",
    "mismatch": "but rank 1 is at collective #",
    "stall": "rank 1 did not reach collective #2",
}


def assert_survivor_names(output: str, mode: str) -> None:
    """Process 0's own lines (the launcher prefixes them) name what befell process 1."""
    survivor = [line for line in output.splitlines() if line.startswith("[rank 0]")]
    assert any(CASES[mode] in line for line in survivor), output


def _free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize("meeting", ["native", "python"])  # (the guard's, in C or not)
@pytest.mark.parametrize("mode", sorted(CASES))
def test_survivor_names_the_failed_process(mode, meeting):
    needs_mpi()
    marker = new_marker()
    # One of the jobs joins through an explicit coordinator (and its shared secret).
    explicit = [_free_address()] if mode == "mismatch" else []
    done = launch(2, "fail.py", mode, marker, *explicit,
                  timeout=4 if mode == "stall" else 20, deadline=120,
                  extra_env={"EMBER_TEST_MEETING": meeting})
    output = done.stdout + done.stderr
    assert_survivor_names(output, mode)
    assert done.returncode == (3 if mode == "exit" else 1), output  # the first failure's
    if mode == "mismatch":  # both name the two programs' shapes
        assert "f32[4,3]" in output and "f32[6,3]" in output
    assert processes_with(marker) == [], "processes of the job outlived it"


def test_wrong_coordinator_is_a_clear_error():
    needs_mpi()
    done = run_alone("join.py", "127.0.0.1:9", extra_env={
        "EMBER_DISTRIBUTED_TIMEOUT": "2", "EMBER_JOB_SECRET": "s3cret"})
    assert done.returncode != 0
    assert "cannot reach the coordinator at 127.0.0.1:9" in done.stderr, done.stderr


def test_a_failing_process_waits_for_the_others_reports():
    needs_mpi()
    marker = new_marker()
    done = launch(2, "fail.py", "raise", marker, timeout=20, deadline=120,
                  extra_env={"EMBER_TEST_SLOW_REPORT": "1"})
    output = done.stdout + done.stderr
    assert_survivor_names(output, "raise")
    assert "[rank 0] report written" in output, output
    assert done.returncode == 1, output
    assert processes_with(marker) == [], "processes of the job outlived it"
