"""``ember bench``: Ember against NumPy, JAX and PyTorch on a fixed suite, with floors.

``run_bench`` runs the suite and returns every number; ``main`` is the command line.
The modules: workloads (the suite, written once in JAX style, with its sizes per
platform), reference (the NumPy oracle), torch_impls (PyTorch versions), peers (how each
framework runs a workload), target (CPU or GPU run), floors and gpu_floors (the CPU's and
the card's memory and GEMM limits), settings (how samples are taken), harness (check,
warm up, interleave, time), report (ratios and the table), machine (what it ran on),
compile_probe (fresh-process child).
"""
from ember.bench.command import main
from ember.bench.harness import run_bench

__all__ = ["main", "run_bench"]
