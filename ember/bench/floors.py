"""The CPU's own limits, measured in the same run as the workloads (a GPU's: gpu_floors).

A ratio against JAX says who is faster; a ratio against the floor says how much speed
is left on the table. Two floors bound the suite: memory bandwidth (a large
``np.copyto``) for the elementwise and row-wise workloads, and for the matmul-bound ones
the host's float32 FMA peak: a register-only probe of fused multiply-adds on every core
(include/ember_fma_peak.c), which no GEMM can beat. Beside it, the SGEMM rate of NumPy's
BLAS, of each library Ember's generated code can link (scipy-openblas32; Intel MKL where
installed; Ember's own GEMM), called directly through ctypes, and of JAX's dot where JAX
is installed. Where the probe cannot run, the best library rate is the floor. The same
product in bfloat16 (entry "bf16") beside them: Ember's GEMM with float32 and with
bfloat16 results, JAX's dot, and the register-only rate of vdpbf16ps where the CPU has
AVX512_BF16, that product's floor, and of AMX's TDPBF16PS where the CPU has AMX-BF16
(and the OS grants its tiles): the floor of Ember's bfloat16 GEMM there. Each
floor's result says "status": "ok" (the harness records a floor that could not be
measured with its reason instead).
"""
from __future__ import annotations

import ctypes
import os
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ember.bench.peers import Unavailable, describe_error, timed_calls
from ember.bench.settings import Settings

COPY_BYTES = 64 * 2**20
QUICK_COPY_BYTES = 2**20
SGEMM_N = 1024
QUICK_SGEMM_N = 128
_ROW_MAJOR, _NO_TRANS = 101, 111  # CBLAS enum values


def settled_samples(sample: Callable[[], tuple[float, object]], settings: Settings) -> list[float]:
    """Warm up, then take ``settings.repeats`` samples (``peers.timed_calls``), each after
    the settle pause and ``settings.rewarm`` untimed samples.

    The floors are sampled exactly as the workloads are (harness.measure_workload): a
    floor measured back to back would be measured on warmer caches and busier cores than
    the workloads it bounds (seen here: a 32 MiB copy takes 2.4 ms back to back and about
    6 ms after a 0.2 s pause), and the ratio would compare unlike things.
    """
    for _ in range(settings.warmup):
        sample()
    samples = []
    for _ in range(settings.repeats):
        time.sleep(settings.settle_s)
        for _ in range(settings.rewarm):
            sample()
        samples.append(sample()[0])
    return samples


def _host_samples(fn: Callable[..., object], args: tuple, settings: Settings) -> list[float]:
    return settled_samples(timed_calls(fn, args, lambda out: None, 1), settings)


def measure_copy(settings: Settings) -> dict:
    """Median time of one ``np.copyto`` of a 64 MiB float32 array, sampled as the
    workloads are.

    Bandwidth is counted as STREAM counts a copy: bytes read plus bytes written.
    """
    nbytes = QUICK_COPY_BYTES if settings.quick else COPY_BYTES
    src = np.random.default_rng(0).standard_normal(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    samples = _host_samples(np.copyto, (dst, src), settings)
    assert np.array_equal(dst, src), "np.copyto copied wrongly"
    return copy_result("memory copy (np.copyto)", nbytes, samples)


def copy_result(what: str, nbytes: int, samples: list[float]) -> dict:
    median = statistics.median(samples)
    return {
        "status": "ok",
        "what": what,
        "bytes": nbytes,
        "traffic_bytes": 2 * nbytes,
        "median_s": median,
        "samples_s": samples,
        "gb_per_s": 2 * nbytes / median / 1e9,
    }


Matmul = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def _cblas_sgemm(function) -> Matmul:
    """``c = a @ b`` through a row-major CBLAS ``sgemm`` with 32-bit integers (ctypes)."""
    c_int, c_float, c_ptr = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    function.argtypes = [c_int, c_int, c_int, c_int, c_int, c_int, c_float, c_ptr, c_int,
                         c_ptr, c_int, c_float, c_ptr, c_int]
    function.restype = None

    def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        (m, k), n = a.shape, b.shape[1]
        function(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes.data, k,
                 b.ctypes.data, n, 0.0, c.ctypes.data, n)

    return matmul


def _openblas32_sgemm() -> Matmul:
    """scipy-openblas32's ``scipy_cblas_sgemm``, with OpenBLAS's own threads."""
    try:
        import scipy_openblas32
    except ImportError as error:
        raise Unavailable("scipy-openblas32 is not installed") from error
    path = os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True))
    return _cblas_sgemm(ctypes.CDLL(path).scipy_cblas_sgemm)


_MKL_THREADING_GNU = 3  # mkl_service.h: MKL_THREADING_INTEL, _SEQUENTIAL, _PGI, _GNU, ...


def _mkl_sgemm() -> Matmul:
    """The mkl wheel's ``cblas_sgemm`` through its single dynamic library, threaded by
    GNU OpenMP, as Ember's generated code sets it up (include/ember_blas.h)."""
    from ember.backends.cpu import toolchain

    found = toolchain._mkl()
    if found is None:
        raise Unavailable("mkl is not installed")
    library = ctypes.CDLL(str(sorted(Path(found.lib_dir).glob("libmkl_rt.so.*"))[-1]))
    if "MKL_THREADING_LAYER" not in os.environ:
        library.MKL_Set_Threading_Layer(_MKL_THREADING_GNU)
    return _cblas_sgemm(library.cblas_sgemm)


def _ember_gemm_sgemm() -> Matmul:
    """Ember's own GEMM library (config.blas "ember"), split over the threads of a
    compiled call as its generated calls are (codegen/c_gemm.py)."""
    return _ember_gemm("ember_own_gemm_f32")


def _ember_gemm(symbol: str) -> Matmul:
    """``c = a @ b`` through the ember_own_gemm function ``symbol`` (include/ember_gemm.h;
    its operands and results are those of the arrays passed)."""
    from ember.backends.cpu import ember_gemm, toolchain
    from ember.backends.cpu.backend import num_threads
    from ember.codegen import c_gemm
    from ember.codegen.gemm import GemmPlan, Matrix

    if toolchain.find_toolchain() is None:
        raise Unavailable("no C compiler")
    function = getattr(toolchain.load_library(ember_gemm.library_path()), symbol)
    c_int, i64, c_float, c_ptr = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
    function.argtypes = [c_int, c_int, i64, c_ptr, c_int, c_int, i64, i64, i64, c_ptr, i64, i64,
                         c_ptr, i64, i64, c_ptr, i64, c_float, c_ptr, c_float, c_ptr, c_float,
                         c_int, c_ptr]
    function.restype = None
    no_batch = (ctypes.c_int64 * 5)()  # an ember_batch of rank 0 (its first field)

    def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        (m, k), n = a.shape, b.shape[1]
        plan = GemmPlan(np.dtype(np.float32), (), m, n, k, Matrix(m, k, False, k, 0, ()),
                        Matrix(k, n, False, n, 0, ()))
        split, parts = c_gemm.gemm_split(plan, num_threads())
        function(split, parts, 1, no_batch, _NO_TRANS, _NO_TRANS, m, n, k, a.ctypes.data, k, k,
                 b.ctypes.data, n, 1, c.ctypes.data, n, 1.0, None, 0.0, None, 0.0, 0, None)

    return matmul


def _jax_dot() -> Matmul:
    """JAX's dot (XLA:CPU), jitted, waited for. The operands are put on the device and
    the result copied into ``c`` (for the check) at the first call only: the rate is the
    dot's, as a workload's operands stay on the device."""
    try:
        import jax
    except ImportError as error:
        raise Unavailable("jax is not installed") from error
    dot = jax.jit(jax.numpy.dot)
    placed: dict = {}

    def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        first = not placed
        if first:
            placed.update(a=jax.device_put(a), b=jax.device_put(b))
        out = dot(placed["a"], placed["b"]).block_until_ready()
        if first:
            np.copyto(c, np.asarray(out))

    return matmul


# The libraries measured beside NumPy's BLAS, by the name Ember's toolchain gives them;
# then the peers that are no library of Ember's (never the floor's "ember_blas").
_LINKED_BLAS = {"openblas": ("scipy_openblas32", _openblas32_sgemm), "mkl": ("mkl", _mkl_sgemm),
                "ember": ("ember_gemm", _ember_gemm_sgemm)}
_PEER_GEMMS = {"jax_dot": _jax_dot}
FMA_PEAK = "fma_peak"
FMA_ITERATIONS = 4_000_000
QUICK_FMA_ITERATIONS = 100_000


_PROBES_UNAVAILABLE = {"ember_bf16_dot_peak": "the CPU has no AVX512_BF16",
                       "ember_amx_dot_peak": "the CPU has no AMX-BF16 or the OS refuses its tiles"}


def measure_fma_peak(settings: Settings, probe_name: str = "ember_fma_peak") -> dict:
    """The float32 FMA rate of every thread of a compiled call at once (registers only),
    sampled as the workloads are; ``probe_name`` "ember_bf16_dot_peak": vdpbf16ps's
    rate instead, "ember_amx_dot_peak": AMX's TDPBF16PS's (include/ember_fma_peak.c)."""
    from ember.backends.cpu import toolchain
    from ember.backends.cpu.backend import num_threads

    if toolchain.find_toolchain() is None:
        raise Unavailable("no C compiler")
    source = (toolchain.INCLUDE_DIR / "ember_fma_peak.c").read_text()
    path = toolchain.compile_shared_library(source, name="ember_fma_peak",
                                            extra_flags=("-ffp-contract=fast",))
    probe = getattr(toolchain.load_library(path), probe_name)
    probe.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_float)]
    probe.restype = ctypes.c_double
    threads = num_threads()
    iterations = QUICK_FMA_ITERATIONS if settings.quick else FMA_ITERATIONS
    sink = ctypes.c_float()
    flops = probe(threads, iterations, ctypes.byref(sink))
    if flops == 0:
        raise Unavailable(_PROBES_UNAVAILABLE.get(probe_name, "the probe did no work"))

    def sample() -> tuple[float, None]:
        start = time.perf_counter()
        probe(threads, iterations, ctypes.byref(sink))
        return time.perf_counter() - start, None

    samples = settled_samples(sample, settings)
    median = statistics.median(samples)
    return {"status": "ok", "threads": threads, "flops": flops, "median_s": median,
            "samples_s": samples, "gflops": flops / median / 1e9}


def _ember_blas() -> str | None:
    """The name (as measured here) of the BLAS Ember's generated code links."""
    try:
        from ember.backends.cpu import toolchain

        linked = toolchain.blas()
    except Exception:
        return None
    return _LINKED_BLAS[linked.name][0] if linked is not None else None


def measure_sgemm(settings: Settings) -> dict:
    """GFLOP/s of a square float32 matmul through each BLAS (and JAX's dot), beside the
    FMA peak (entry "fma_peak").

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
    result: dict = {"status": "ok", "n": n, "flops": flops, "blas": {}, "ember_blas": _ember_blas()}
    impls: dict[str, Callable] = {"numpy": lambda a, b, c: np.matmul(a, b, out=c)}
    for name, load in [*_LINKED_BLAS.values(), *_PEER_GEMMS.items()]:
        try:
            impls[name] = load()
        except Exception as error:
            result["blas"][name] = _failed(error)
    try:
        result[FMA_PEAK] = measure_fma_peak(settings)
    except Exception as error:
        result[FMA_PEAK] = _failed(error)

    for name, matmul in impls.items():
        out = np.zeros((n, n), np.float32)
        samples = _host_samples(matmul, (a, b, out), settings)
        result["blas"][name] = gemm_rate_entry(out, expected, 1e-4, flops, samples)
    result["bf16"] = _measure_bf16(a, b, flops, settings)
    return result


# bfloat16 GEMMs beside the float32 ones: Ember's with float32 results and with
# bfloat16 results (rounded once), and JAX's dot (bfloat16 results).
_BF16_GEMMS = {"ember_gemm": (np.float32, lambda: _ember_gemm("ember_own_gemm_bf16")),
               "ember_gemm_to_bf16": ("bfloat16", lambda: _ember_gemm("ember_own_gemm_bf16_bf16")),
               "jax_dot": ("bfloat16", _jax_dot)}
BF16_PEAK = "dot_peak"
AMX_PEAK = "amx_peak"
_BF16_PEAKS = {BF16_PEAK: "ember_bf16_dot_peak", AMX_PEAK: "ember_amx_dot_peak"}


def _measure_bf16(a: np.ndarray, b: np.ndarray, flops: float, settings: Settings) -> dict:
    """The bfloat16 rates of ``a @ b`` (rounded to bfloat16) by name, and the
    register-only rates of vdpbf16ps (``BF16_PEAK``) and AMX's TDPBF16PS (``AMX_PEAK``):
    a bfloat16 GEMM's floor is the faster the CPU has."""
    try:
        import ml_dtypes
    except ImportError as error:
        missing = _failed(Unavailable(f"ml_dtypes is not installed: {error}"))
        return {name: missing for name in _BF16_PEAKS}
    a, b = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    rates: dict = {}
    for name, probe in _BF16_PEAKS.items():
        try:
            rates[name] = measure_fma_peak(settings, probe)
        except Exception as error:
            rates[name] = _failed(error)
    for name, (result, load) in _BF16_GEMMS.items():
        try:
            matmul = load()
        except Exception as error:
            rates[name] = _failed(error)
            continue
        out = np.zeros(expected.shape, ml_dtypes.bfloat16 if result == "bfloat16" else result)
        samples = _host_samples(matmul, (a, b, out), settings)
        rates[name] = gemm_rate_entry(out.astype(np.float64), expected, 1e-2, flops, samples)
    return rates


def _failed(error: Exception) -> dict:
    status = "n/a" if isinstance(error, Unavailable) else "error"
    return {"status": status, "reason": describe_error(error)}


def gemm_rate_entry(got: np.ndarray, expected: np.ndarray, tolerance: float, flops: float,
                    samples: list[float]) -> dict:
    """A GEMM's rate, if its result (checked after timing) is within ``tolerance``
    (max |error| / max |expected|); else a "wrong" entry without one."""
    error = np.abs(got - expected).max() / np.abs(expected).max()
    if not error <= tolerance:
        return {"status": "wrong", "reason": f"max relative error {error:.1e}"}
    median = statistics.median(samples)
    return {"status": "ok", "median_s": median, "samples_s": samples, "gflops": flops / median / 1e9}


def sgemm_rate(sgemm: dict) -> tuple[str, float] | None:
    """The rate Ember is held to: the FMA peak where it was measured, else the best
    library rate (``library_rate``)."""
    peak = sgemm.get(FMA_PEAK, {})
    if peak.get("status") == "ok":
        return FMA_PEAK, peak["gflops"]
    return library_rate(sgemm)


def library_rate(sgemm: dict) -> tuple[str, float] | None:
    """The best rate measured through any library or peer but Ember's own GEMM (the
    machine's SGEMM rate, whichever reaches it), not only that of the BLAS Ember links:
    a BLAS whose own threading is slow here would make a low bar."""
    own = _LINKED_BLAS["ember"][0]
    rates = [(entry["gflops"], name) for name, entry in sgemm["blas"].items()
             if entry.get("status") == "ok" and name != own]
    if not rates:
        return None
    gflops, name = max(rates)
    return name, gflops
