"""The ``ember`` command: ``ember demo``, ``ember bench``, ``ember info``, ``ember fuzz``,
``ember launch``, ``ember prepare``."""
from __future__ import annotations

import argparse
import importlib
import platform
import sys
from typing import Callable, Sequence


def _info(argv: Sequence[str]) -> int:
    """Print what Ember found on this machine (with ``--pipeline``: a compiler pipeline)."""
    parser = argparse.ArgumentParser(prog="ember info")
    parser.add_argument("--pipeline", nargs="?", const="cpu", metavar="BACKEND",
                        help="print the stages that compile a program for BACKEND "
                             "(default: cpu), then the graph passes of the first stage")
    args = parser.parse_args(argv)
    if args.pipeline is not None:
        return _pipeline(args.pipeline)
    import numpy as np

    import ember
    from ember.runtime.devices import available_backends, default_backend

    print(f"ember {ember.__version__} on Python {platform.python_version()}, "
          f"NumPy {np.__version__}, {platform.machine()}")
    print(f"backends present: {', '.join(available_backends())}; "
          f"default: {default_backend().name}")
    print(f"devices: {ember.devices()}")
    try:
        from ember.backends.cpu.toolchain import blas, find_toolchain

        toolchain = find_toolchain()
        print(f"C compiler: {toolchain.cc + ' (' + toolchain.version + ')' if toolchain else 'none'}")
        info = blas()
        print(f"BLAS: {info.version if info else 'not installed (pip install scipy-openblas32)'}")
    except ImportError:
        pass
    print(f"CUDA: {_cuda_summary()}")
    try:
        from ember.runtime.compile_cache import default_cache

        print(f"compile cache: {default_cache().directory}")
    except ImportError:
        pass
    return 0


def _prepare(argv: Sequence[str]) -> int:
    """Build the CPU backend's per-host libraries now, in the foreground."""
    parser = argparse.ArgumentParser(
        prog="ember prepare",
        description="Build what the CPU backend compiles once per host (the launcher, "
                    "Ember's GEMM, the BLAS choice's measurement, the GEMM wrapper) into "
                    "the compile cache now, as in a container image, rather than in the "
                    "background of the first programs.")
    parser.parse_args(argv)
    import time

    from ember.backends.cpu import host_libraries
    from ember.errors import BackendUnavailableError
    from ember.runtime.compile_cache import default_cache

    start = time.perf_counter()
    try:
        host_libraries.prepare()
        absent = host_libraries.missing()
    except BackendUnavailableError as error:  # (a BLAS the configuration names is absent)
        print(f"ember prepare: {error}", file=sys.stderr)
        return 1
    if absent:
        print(f"ember prepare: could not build {', '.join(absent)} (see `ember info`)",
              file=sys.stderr)
        return 1
    print(f"ember prepare: per-host libraries ready in {default_cache().directory} "
          f"({time.perf_counter() - start:.1f} s)")
    return 0


def _pipeline(backend: str) -> int:
    from ember.compiler.pipeline import PIPELINES, stage_names
    from ember.passes.pipeline import GRAPH_PIPELINES

    if backend not in PIPELINES:
        print(f"ember info: no pipeline for backend {backend!r}; pipelines: "
              f"{', '.join(sorted(PIPELINES))}", file=sys.stderr)
        return 2
    print("(a program split over a mesh is partitioned first, in jit: "
          "ember.sharding.partitioner)")
    for number, name in enumerate(stage_names(backend), start=1):
        print(f"{number}. {name}")
        if name == "graph_passes":
            print("".join(f"   - {p.__name__}\n" for p in GRAPH_PIPELINES[backend]), end="")
    return 0


def _cuda_summary() -> str:
    from ember.backends.cuda import cublas, driver, nvrtc

    version = nvrtc.nvrtc_version()
    if version is None:
        return "NVRTC not installed (pip install 'ember[cuda]')"
    gpus = ", ".join(g.name for g in driver.gpus()) or "no GPU (compile-only)"
    library = "found" if cublas.load_library() is not None else "not installed"
    return f"NVRTC {version}; {gpus}; cuBLAS {library}"


def _lazy(module: str, function: str = "main") -> Callable[[Sequence[str]], int]:
    def run(argv: Sequence[str]) -> int:
        return getattr(importlib.import_module(module), function)(list(argv)) or 0

    return run


COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "demo": (_lazy("ember.demo"), "train a small character-level GPT and show compiled vs eager speed"),
    "bench": (_lazy("ember.bench"), "benchmark Ember against NumPy, JAX and PyTorch on this machine"),
    "info": (_info, "show backends, devices, compiler, BLAS and cache"),
    "fuzz": (_lazy("ember.fuzz"), "differential fuzzing of the compiler against the reference"),
    "launch": (_lazy("ember.distributed.launcher"),
               "run a script in N processes through mpirun (ember.distributed)"),
    "prepare": (_prepare, "build the CPU backend's per-host libraries now"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: ember <command> [options]\n\ncommands:")
        for name, (_, help_text) in COMMANDS.items():
            print(f"  {name:<7} {help_text}")
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    command, _ = COMMANDS[argv[0]]
    return command(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
