"""The launcher's command line, its output prefixes and its exit status."""
from __future__ import annotations

import io

from ember.distributed import launcher


def test_command_handles_root_and_oversubscription(monkeypatch):
    monkeypatch.setattr(launcher.os, "geteuid", lambda: 0)
    command = launcher.build_command("mpirun", 4, ["train.py", "--lr", "1"], open_mpi=True,
                                     forwarded=["EMBER_NUM_CPU_DEVICES"])
    assert command[:3] == ["mpirun", "-n", "4"]
    for flag in ("--allow-run-as-root", "--oversubscribe", "--with-ft"):
        assert flag in command
    assert command[command.index("-x") + 1] == "EMBER_NUM_CPU_DEVICES"
    assert command[-5:] == ["-m", "ember.distributed.rank_main", "train.py", "--lr", "1"]


def test_command_for_several_hosts_and_mpich(monkeypatch):
    monkeypatch.setattr(launcher.os, "geteuid", lambda: 1000)
    command = launcher.build_command("mpiexec", 2, ["s.py"], open_mpi=False,
                                     hostfile="hosts")
    assert "--allow-run-as-root" not in command and "-prepend-rank" in command
    assert command[command.index("-f") + 1] == "hosts"
    open_mpi = launcher.build_command("mpirun", 2, ["s.py"], open_mpi=True, hostfile="hosts")
    assert "--allow-run-as-root" not in open_mpi
    assert open_mpi[open_mpi.index("--hostfile") + 1] == "hosts"


def test_each_line_gets_its_rank():
    source = io.BytesIO(b"[1,0]<stdout>: hello\n[1,3]<stderr>: oops\nuntagged\n")
    sink = io.BytesIO()
    launcher._pump(source, sink)
    assert sink.getvalue() == b"[rank 0] hello\n[rank 3] oops\nuntagged\n"


def test_a_rank_that_exits_mid_line_does_not_join_the_next_ranks_line():
    # mpirun writes a rank's unfinished last line without a newline (seen with Open
    # MPI 5: `[1,0]<stderr>: partial` at the exit of rank 0), then the next tagged line
    source = io.BytesIO(b"[1,0]<stderr>: partial[1,1]<stderr>: whole\n[1,1]<stdout>: tail")
    sink = io.BytesIO()
    launcher._pump(source, sink)
    assert sink.getvalue() == b"[rank 0] partial\n[rank 1] whole\n[rank 1] tail\n"


def test_exit_status_is_the_first_failure_in_time():
    statuses = {0: (1, 300), 1: (3, 200), 2: (0, 100)}
    assert launcher._first_failure(statuses, 0) == 3
    assert launcher._first_failure({0: (0, 1), 1: (0, 2)}, 0) == 0
    assert launcher._first_failure({0: (0, 1), 1: None}, 0) == 137  # killed
