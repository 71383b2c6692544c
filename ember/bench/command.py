"""``ember bench``: the command line over ``run_bench``."""
from __future__ import annotations

import argparse

from ember.bench.harness import ALL_NAMES, FLOOR_NAMES, run_bench
from ember.bench.workloads import SUITE

FLOOR_DESCRIPTIONS = {
    "floor_copy": "memory bandwidth: np.copyto of 64 MiB float32",
    "floor_sgemm": "SGEMM GFLOP/s at 1024^3: NumPy's BLAS, scipy-openblas32 and MKL (if installed)",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember bench",
        description="Time Ember against NumPy, JAX and PyTorch (where installed) on a fixed "
                    "suite, next to the machine's memory and SGEMM floors.",
    )
    parser.add_argument("--backend", help="Ember backend to measure (default: Ember's default)")
    parser.add_argument("--json", metavar="PATH", help="also write every raw number to PATH")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repeats: a smoke test, not a measurement")
    parser.add_argument("--only", metavar="NAME,...",
                        help="run only these workloads (their floors come along)")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit status 1 when Ember gave a wrong answer on any workload, else 0."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        for workload in SUITE:
            print(f"{workload.name:14} {workload.description}")
        for name in FLOOR_NAMES:
            print(f"{name:14} {FLOOR_DESCRIPTIONS[name]}")
        return 0
    only = None
    if args.only:
        only = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in only if name not in ALL_NAMES]
        if unknown:
            parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(ALL_NAMES)}")
    summary = run_bench(args.backend, args.json, args.quick, only)
    ember_wrong = any(entry["frameworks"].get("ember", {}).get("status") == "wrong"
                      for entry in summary["workloads"].values())
    return 1 if ember_wrong else 0
