"""``ember bench --distributed``: Ember's all-reduce across processes against mpi4py's
own ``Allreduce`` on the same buffers, 1 KiB to 64 MiB, with 2 and 4 processes; then
the data-parallel GPT block step on 2 processes x 1 device against 1 process x 2
devices, with their losses.

Each process count is one ``ember launch`` of ``distributed_worker``; its process 0
writes the timings, and this module prints them side by side. Ember's all-reduce is
measured twice: as users call it (``psum`` in a jitted ``shard_map`` over a mesh axis
that crosses processes) and as the host collective underneath (``reduce_in_order``).
The GPT step (``distributed_gpt``) runs in both layouts twice, in the order A B B A,
so that a change of the machine's load hits both alike; its step time is the median of
every sample of a layout.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from ember.bench.sharded import LOSS_RTOL

__all__ = ["main", "ready_to_time"]

SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB
QUICK_SIZES = [1 << 10, 1 << 16, 1 << 20]
GPT_LAYOUTS = ((2, 1), (1, 2))  # (processes, devices per process)
GPT_TARGET = 1.2  # issue 19: 2 processes x 1 device at most 1.2x 1 process x 2 devices


def ready_to_time() -> None:
    """In a worker: build the per-host libraries and wait for the guard's C meeting.
    Until they are built, once per host, programs run without the launcher and the
    guard meets through mpi4py: the workers time what every later run gets."""
    from ember.backends.cpu.host_libraries import prepare
    from ember.distributed.native_meeting import native_meetings

    prepare()
    native_meetings(wait=True)


def _label(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember bench --distributed")
    parser.add_argument("--processes", default="2,4", help="process counts (default 2,4)")
    parser.add_argument("--suite", choices=("all", "allreduce", "gpt"), default="all")
    parser.add_argument("--quick", action="store_true", help="three sizes, few repeats")
    parser.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    args = parser.parse_args(argv)
    found: dict = {}
    if args.suite in ("all", "allreduce"):
        results = {}
        for count in [int(n) for n in args.processes.split(",")]:
            extra = ["--quick"] if args.quick else []
            results[count] = _launch(count, None, "distributed_worker.py", extra)
            if results[count] is None:
                return 1
        _print(results)
        found["allreduce"] = results
    if args.suite in ("all", "gpt"):
        found["gpt"] = _gpt(args.quick)
        if found["gpt"] is None:
            return 1
        print(_gpt_table(found["gpt"]))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(found, handle, indent=1)
    return 0


def _launch(processes: int, devices: int | None, worker: str, extra: list[str]) -> dict | None:
    """What process 0 of ``ember launch`` of ``worker`` wrote (None: the run failed)."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "result.json")
        command = [sys.executable, "-m", "ember", "launch", "-n", str(processes)]
        if devices is not None:
            command += ["--devices-per-process", str(devices)]
        command += [os.path.join(os.path.dirname(__file__), worker), out, *extra]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(out):
            print(f"ember bench --distributed: the {processes}-process run of {worker} "
                  f"failed:\n{done.stdout}{done.stderr}", file=sys.stderr)
            return None
        with open(out) as handle:
            return json.load(handle)


def _gpt(quick: bool) -> dict | None:
    """Both layouts, in the order A B B A; per layout every sample and the first run's
    losses and first call (trace, compile, one step)."""
    extra = ["--sizes", "quick", "--samples", "3"] if quick else ["--samples", "5"]
    found: dict = {}
    for layout in [*GPT_LAYOUTS, *reversed(GPT_LAYOUTS)]:
        run = _launch(*layout, "distributed_gpt.py", extra)
        if run is None:
            return None
        name = f"{layout[0]}x{layout[1]}"
        kept = found.setdefault(name, {"losses": run["losses"], "samples_s": [],
                                       "first_call_s": run["first_call_s"]})
        kept["samples_s"] += run["samples_s"]
    for kept in found.values():
        kept["step_s"] = statistics.median(kept["samples_s"])
    return {"sizes": "quick" if quick else "cpu", "layouts": found}


def _gpt_table(result: dict) -> str:
    layouts = result["layouts"]
    lines = [f"data-parallel GPT block step (gpt_block_dp, {result['sizes']} sizes): "
             "processes x devices per process; median of samples",
             f"{'layout':>6} {'step ms':>9} {'first call s':>12}  losses"]
    for name, kept in layouts.items():
        losses = " ".join(f"{v:.6f}" for v in kept["losses"])
        lines.append(f"{name:>6} {kept['step_s'] * 1e3:>9.2f} {kept['first_call_s']:>12.2f}"
                     f"  {losses}")
    many, one = layouts["2x1"], layouts["1x2"]
    ratio = many["step_s"] / one["step_s"]
    if many["losses"] == one["losses"]:
        same = "bitwise equal"
    elif all(abs(a - b) <= LOSS_RTOL * abs(b) for a, b in zip(many["losses"], one["losses"])):
        same = f"equal within rtol {LOSS_RTOL:g} (float32 rounding)"
    else:
        same = f"DIFFERENT (beyond rtol {LOSS_RTOL:g})"
    lines.append(f"2x1 / 1x2 step: {ratio:.2f} (target: at most {GPT_TARGET}); "
                 f"losses {same}")
    return "\n".join(lines)


def _print(results: dict) -> None:
    print("all-reduce (sum, float32) across processes: algorithm bandwidth in GB/s "
          "(bytes / time), median of trials; then CPU time per call in us (the slowest "
          "process's, waiting for peers included)")
    header = (f"{'procs':>5} {'size':>8} {'mpi4py':>9} {'ember psum':>11} {'ratio':>6} "
              f"{'ember host':>11} {'ratio':>6} {'cpu mpi4py':>11} {'cpu psum':>9} "
              f"{'cpu host':>9}")
    print(header)
    print("-" * len(header))
    for count, rows in results.items():
        for row in rows:
            mpi, psum, host = (row["bytes"] / row[k] / 1e9 for k in ("mpi", "psum", "host"))
            cpu = [row.get(f"{k}_cpu", float("nan")) * 1e6 for k in ("mpi", "psum", "host")]
            print(f"{count:>5} {_label(row['bytes']):>8} {mpi:>9.3f} {psum:>11.3f} "
                  f"{psum / mpi:>6.2f} {host:>11.3f} {host / mpi:>6.2f} {cpu[0]:>11.1f} "
                  f"{cpu[1]:>9.1f} {cpu[2]:>9.1f}")
