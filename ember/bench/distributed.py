"""``ember bench --distributed``: Ember's all-reduce across processes against mpi4py's
own ``Allreduce`` on the same buffers, 1 KiB to 64 MiB, with 2 and 4 processes.

Each process count is one ``ember launch`` of ``distributed_worker``; its process 0
writes the timings, and this module prints them side by side. Ember's all-reduce is
measured twice: as users call it (``psum`` in a jitted ``shard_map`` over a mesh axis
that crosses processes) and as the host collective underneath (``reduce_in_order``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

__all__ = ["main"]

SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB
QUICK_SIZES = [1 << 10, 1 << 16, 1 << 20]


def _label(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember bench --distributed")
    parser.add_argument("--processes", default="2,4", help="process counts (default 2,4)")
    parser.add_argument("--quick", action="store_true", help="three sizes, few repeats")
    parser.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    args = parser.parse_args(argv)
    worker = os.path.join(os.path.dirname(__file__), "distributed_worker.py")
    results = {}
    for count in [int(n) for n in args.processes.split(",")]:
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "result.json")
            command = [sys.executable, "-m", "ember", "launch", "-n", str(count), worker, out]
            if args.quick:
                command.append("--quick")
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0 or not os.path.exists(out):
                print(f"ember bench --distributed: the {count}-process run failed:\n"
                      f"{done.stdout}{done.stderr}", file=sys.stderr)
                return 1
            with open(out) as handle:
                results[count] = json.load(handle)
    _print(results)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


def _print(results: dict) -> None:
    print("all-reduce (sum, float32) across processes: algorithm bandwidth in GB/s "
          "(bytes / time), median of trials")
    header = (f"{'procs':>5} {'size':>8} {'mpi4py':>9} {'ember psum':>11} {'ratio':>6} "
              f"{'ember host':>11} {'ratio':>6}")
    print(header)
    print("-" * len(header))
    for count, rows in results.items():
        for row in rows:
            mpi, psum, host = (row["bytes"] / row[k] / 1e9 for k in ("mpi", "psum", "host"))
            print(f"{count:>5} {_label(row['bytes']):>8} {mpi:>9.3f} {psum:>11.3f} "
                  f"{psum / mpi:>6.2f} {host:>11.3f} {host / mpi:>6.2f}")
