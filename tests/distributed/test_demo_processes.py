"""``ember demo --processes 2``: the demo GPT trained data-parallel across two processes
(through ``ember launch``) has the one-process run's losses."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ember import demo
from tests.distributed.conftest import ROOT, _environment, needs_mpi

ARGS = ["--steps", "3", "--layers", "1", "--width", "32", "--batch", "8", "--sample", "4"]


def test_two_processes_train_as_one(tmp_path, capsys):
    needs_mpi()
    result = subprocess.run([sys.executable, "-m", "ember", "demo", "--processes", "2", *ARGS,
                             "--out", str(tmp_path / "two")], cwd=ROOT, env=_environment(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "data-parallel across 2 processes" in result.stdout
    assert "[rank 1]" not in result.stdout  # process 0 alone reports
    assert (tmp_path / "two" / "loss.png").exists() or "loss curve" not in result.stdout
    assert demo.main([*ARGS, "--out", str(tmp_path / "one")]) == 0
    alone = capsys.readouterr().out
    loss = re.compile(r"loss: ([\d.]+) -> ([\d.]+) over 3 steps")
    assert loss.search(result.stdout).groups() == loss.search(alone).groups()


def test_processes_and_devices_do_not_mix(capsys):
    with pytest.raises(SystemExit) as stop:
        demo.main(["--processes", "2", "--devices", "2"])
    assert stop.value.code == 2
    assert "--processes takes a count" in capsys.readouterr().err
