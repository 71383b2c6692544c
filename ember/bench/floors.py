"""The machine's own limits, measured in the same run as the workloads.

A ratio against JAX says who is faster; a ratio against the floor says how much speed
is left on the table. Two floors bound the suite: memory bandwidth (a large
``np.copyto``) for the elementwise and row-wise workloads, and the SGEMM rate for the
matmul-bound ones, measured through NumPy's BLAS and through the scipy-openblas32
library that Ember's generated code links, called directly through ctypes.
"""
from __future__ import annotations

import ctypes
import os
import statistics
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from ember.bench.peers import Unavailable, describe_error

if TYPE_CHECKING:
    from ember.bench.harness import Settings

COPY_BYTES = 64 * 2**20
QUICK_COPY_BYTES = 2**20
SGEMM_N = 1024
QUICK_SGEMM_N = 128
_ROW_MAJOR, _NO_TRANS = 101, 111  # CBLAS enum values


def _settled_samples(fn: Callable[[], object], settings: Settings) -> list[float]:
    """Warm up, then time ``settings.repeats`` calls, each after the settle pause.

    The floors are sampled exactly as the workloads are (harness.measure_workload): a
    floor measured back to back would be measured on warmer caches and busier cores than
    the workloads it bounds (seen here: a 32 MiB copy takes 2.4 ms back to back and about
    6 ms after a 0.2 s pause), and the ratio would compare unlike things.
    """
    for _ in range(settings.warmup):
        fn()
    samples = []
    for _ in range(settings.repeats):
        time.sleep(settings.settle_s)
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def measure_copy(settings: Settings) -> dict:
    """Median time of one ``np.copyto`` of a 64 MiB float32 array, sampled as the
    workloads are.

    Bandwidth is counted as STREAM counts a copy: bytes read plus bytes written.
    """
    nbytes = QUICK_COPY_BYTES if settings.quick else COPY_BYTES
    src = np.random.default_rng(0).standard_normal(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    samples = _settled_samples(lambda: np.copyto(dst, src), settings)
    assert np.array_equal(dst, src), "np.copyto copied wrongly"
    median = statistics.median(samples)
    return {
        "bytes": nbytes,
        "traffic_bytes": 2 * nbytes,
        "median_s": median,
        "samples_s": samples,
        "gb_per_s": 2 * nbytes / median / 1e9,
    }


def _openblas32_sgemm() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """``c = a @ b`` through scipy-openblas32's ``scipy_cblas_sgemm`` (row-major, 32-bit ints)."""
    try:
        import scipy_openblas32
    except ImportError as error:
        raise Unavailable("scipy-openblas32 is not installed") from error
    path = os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True))
    sgemm = ctypes.CDLL(path).scipy_cblas_sgemm
    c_int, c_float, c_ptr = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    sgemm.argtypes = [c_int, c_int, c_int, c_int, c_int, c_int, c_float, c_ptr, c_int,
                      c_ptr, c_int, c_float, c_ptr, c_int]
    sgemm.restype = None

    def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        (m, k), n = a.shape, b.shape[1]
        sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes.data, k,
              b.ctypes.data, n, 0.0, c.ctypes.data, n)

    return matmul


def measure_sgemm(settings: Settings) -> dict:
    """GFLOP/s of a square float32 matmul through each BLAS.

    Unlike the frameworks, the two BLAS libraries are timed one after the other, each in
    a block: two OpenBLAS thread pools taking turns call by call slow each other down
    (the workers of one spin while the other runs; seen here: 128^3 at 1 GFLOP/s).
    """
    n = QUICK_SGEMM_N if settings.quick else SGEMM_N
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    flops = 2.0 * n**3
    result: dict = {"n": n, "flops": flops, "blas": {}}
    impls: dict[str, Callable] = {"numpy": lambda a, b, c: np.matmul(a, b, out=c)}
    try:
        impls["scipy_openblas32"] = _openblas32_sgemm()
    except Exception as error:
        status = "n/a" if isinstance(error, Unavailable) else "error"
        result["blas"]["scipy_openblas32"] = {"status": status, "reason": describe_error(error)}

    for name, matmul in impls.items():
        out = np.zeros((n, n), np.float32)
        samples = _settled_samples(lambda: matmul(a, b, out), settings)
        error = np.abs(out - expected).max() / np.abs(expected).max()
        if not error <= 1e-4:
            result["blas"][name] = {"status": "wrong", "reason": f"max relative error {error:.1e}"}
            continue
        median = statistics.median(samples)
        result["blas"][name] = {"status": "ok", "median_s": median, "samples_s": samples,
                                "gflops": flops / median / 1e9}
    return result


def sgemm_rate(sgemm: dict) -> tuple[str, float] | None:
    """The rate Ember is held to: the BLAS Ember links if it was measured, else NumPy's."""
    for name in ("scipy_openblas32", "numpy"):
        entry = sgemm["blas"].get(name, {})
        if entry.get("status") == "ok":
            return name, entry["gflops"]
    return None
