"""``ember bench``: the command line over ``run_bench``."""
from __future__ import annotations

import argparse
import sys

from ember.bench import floors, gpu_floors, target
from ember.bench.harness import ALL_NAMES, FLOOR_NAMES, run_bench
from ember.bench.workloads import SUITE

FLOOR_DESCRIPTIONS = {
    "cpu": {
        "floor_copy": f"memory bandwidth: np.copyto of {floors.COPY_BYTES // 2**20} MiB float32",
        "floor_sgemm": "float32 FMA peak of all cores (registers only), beside SGEMM "
                       f"GFLOP/s at {floors.SGEMM_N}^3: NumPy's BLAS, scipy-openblas32, MKL "
                       "(if installed), Ember's GEMM and JAX's dot (if installed); the same "
                       "in bfloat16 beside vdpbf16ps's peak (AVX512_BF16)",
    },
    "gpu": {
        "floor_copy": f"device memory bandwidth: cuMemcpyDtoDAsync of "
                      f"{gpu_floors.COPY_BYTES['gpu'] // 2**20} MiB",
        "floor_sgemm": f"GEMM GFLOP/s at {gpu_floors.GEMM_N['gpu']}^3 through cuBLAS: float32 "
                       "(the floor) and bfloat16",
    },
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember bench",
        description="Time Ember against NumPy, JAX and PyTorch (where installed) on a fixed "
                    "suite, next to the machine's memory and SGEMM floors. With a GPU backend "
                    "(--backend cuda) the floors are the card's, the sizes are larger and the "
                    "peers run on the card (NumPy is left out).",
    )
    parser.add_argument("--backend", help="Ember backend to measure (default: Ember's default)")
    parser.add_argument("--json", metavar="PATH", help="also write every raw number to PATH")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repeats: a smoke test, not a measurement")
    parser.add_argument("--only", metavar="NAME,...",
                        help="run only these workloads (their floors come along)")
    parser.add_argument("--torch", action="store_true",
                        help="instead: PyTorch models trained by eager PyTorch, inductor and "
                             "torch.compile(backend='ember'), side by side (--only mlp,cnn,"
                             "gpt_block,lstm)")
    parser.add_argument("--list", action="store_true",
                        help="list the workloads at the sizes a run would use and exit")
    parser.add_argument("--sharded", action="store_true",
                        help="instead of the suite: data-parallel train steps on 1, 2 and 8 "
                             "CPU devices against JAX's (ember.bench.sharded)")
    parser.add_argument("--per-device", action="store_true",
                        help="with --sharded: also time Ember's spmd_execution='per_device' "
                             "(one thread per device)")
    parser.add_argument("--distributed", action="store_true",
                        help="instead of the suite: all-reduce across 2 and 4 processes, "
                             "Ember against mpi4py (takes its own options)")
    parser.add_argument("--torch-ops", action="store_true",
                        help="instead of the suite: PyTorch's OpInfo ops through Ember "
                             "and inductor against eager (takes its own options)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit status 1 when Ember gave a wrong answer on any workload, 2 when the run could
    not start (a GPU backend without a GPU), else 0."""
    given = sys.argv[1:] if argv is None else list(argv)
    if "--distributed" in given:  # a suite of its own
        from ember.bench import distributed

        return distributed.main([a for a in given if a != "--distributed"])
    if "--torch-ops" in given:  # a sweep of its own
        from ember.bench import torch_opinfo

        return torch_opinfo.main([a for a in given if a != "--torch-ops"])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.sharded:
        from ember.bench import sharded  # (not at import: it runs as `python -m` children)

        return sharded.main((["--quick"] if args.quick else [])
                            + (["--per-device"] if args.per_device else [])
                            + (["--json", args.json] if args.json else []))
    if args.torch:
        from ember.bench import torch_workloads  # (imports PyTorch)
        only = [name.strip() for name in args.only.split(",")] if args.only else None
        try:
            results = torch_workloads.run(args.quick, args.json, only)
        except ValueError as error:
            parser.error(str(error))
        return 1 if any(r.status["ember"] == "wrong" for r in results) else 0
    platform = target.platform(args.backend)
    if args.list:
        sizes = target.sizes(platform, args.quick)
        for workload in SUITE:
            print(f"{workload.name:14} {workload.describe(sizes)}")
        for name in FLOOR_NAMES:
            print(f"{name:14} {FLOOR_DESCRIPTIONS[platform][name]}")
        return 0
    only = None
    if args.only:
        only = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in only if name not in ALL_NAMES]
        if unknown:
            parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(ALL_NAMES)}")
    try:
        summary = run_bench(args.backend, args.json, args.quick, only)
    except target.NoGpu as error:
        print(f"ember bench: {error}", file=sys.stderr)
        return 2
    ember_wrong = any(entry["frameworks"].get("ember", {}).get("status") == "wrong"
                      for entry in summary["workloads"].values())
    return 1 if ember_wrong else 0
