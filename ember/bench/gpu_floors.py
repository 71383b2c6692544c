"""The card's own limits, measured in the same run as the workloads through Ember's CUDA
driver wrapper (no PyTorch needed): device-to-device copy bandwidth, and cuBLAS's GEMM
rate in float32 (the floor of the float32 workloads) and in bfloat16 (the card's tensor
core rate, reported beside it).

A sample queues several operations on the runtime's stream and waits for them
(``peers.timed_calls`` with a stream synchronize), so the launch and the wait are spread
over more than one operation; results are checked once timing is done.

Written without a GPU and not yet run on one: the tests run it over a host-memory
stand-in for the driver and for cuBLAS.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.bench.floors import copy_result, gemm_rate_entry, settled_samples
from ember.bench.peers import Unavailable, timed_calls
from ember.bench.settings import Settings

COPY_BYTES = {"quick": 2**20, "gpu": 2**30}
GEMM_N = {"quick": 256, "gpu": 8192}
COPY_CALLS = 10  # per sample; a 1 GiB copy takes ~0.5 ms on an H200
GEMM_CALLS = 3   # per sample; 8192^3 takes ~20 ms in float32, ~2 ms in bfloat16
CHECKED_ROWS = 16  # of a GEMM's result, checked in float64 (all: an 8192^3 GEMM on the host)


def _runtime() -> Any:
    """The CUDA runtime Ember's own programs run on (its context, stream, cuBLAS handle)."""
    from ember.runtime.devices import get_backend

    backend = get_backend("cuda")
    runtime = backend.runtime(backend.default_device())
    if runtime is None:
        raise Unavailable("no CUDA device")
    return runtime


def measure_copy(settings: Settings) -> dict:
    """Median time of one device-to-device copy of 1 GiB (cuMemcpyDtoDAsync).

    Bandwidth is counted as STREAM counts a copy: bytes read plus bytes written.
    """
    runtime = _runtime()
    nbytes = COPY_BYTES[settings.sizes]
    pattern = np.arange(nbytes // 4, dtype=np.uint32)
    src, dst = runtime.upload(pattern), runtime.allocate(nbytes)
    sample = timed_calls(runtime.copy, (dst, src, nbytes), lambda out: runtime.synchronize(),
                         COPY_CALLS)
    samples = settled_samples(sample, settings)
    copied = np.empty_like(pattern)
    runtime.download(dst, copied)
    if not np.array_equal(copied, pattern):
        raise RuntimeError("the device-to-device copy copied wrongly")
    return copy_result("device-to-device copy (cuMemcpyDtoDAsync)", nbytes, samples)


def _to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded toward zero (the check uses the rounded values)."""
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def _from_bfloat16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _dtypes() -> dict[str, tuple[Callable, Callable, int, float]]:
    """dtype -> (encode float32 for the card, decode the card's numbers, cudaDataType_t,
    tolerance of the check: max |error| / max |expected|)."""
    from ember.backends.cuda.cublas import CUDA_R_16BF, CUDA_R_32F

    identity = lambda x: x  # noqa: E731
    return {"float32": (identity, identity, CUDA_R_32F, 1e-4),
            "bfloat16": (_to_bfloat16, _from_bfloat16, CUDA_R_16BF, 1e-2)}


def measure_gemm(settings: Settings) -> dict:
    """GFLOP/s of a square matmul through cuBLAS (``cublasGemmEx``, float32 accumulation),
    with float32 operands (entry "blas": the SGEMM floor) and with bfloat16 ("bf16")."""
    runtime = _runtime()
    n = GEMM_N[settings.sizes]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    result: dict = {"status": "ok", "n": n, "flops": 2.0 * n**3, "blas": {}, "ember_blas": None}
    handle = runtime.cublas
    if handle is None:
        missing = {"status": "n/a", "reason": "cuBLAS is not installed (pip install 'ember[cuda]')"}
        result["blas"]["cublas"], result["bf16"] = missing, missing
        return result
    result["ember_blas"] = "cublas"  # Ember's CUDA backend runs its matmuls through it
    result["blas"]["cublas"] = _gemm_rate(runtime, handle, a, b, "float32", result["flops"], settings)
    result["bf16"] = _gemm_rate(runtime, handle, a, b, "bfloat16", result["flops"], settings)
    return result


def _gemm_rate(runtime: Any, handle: Any, a: np.ndarray, b: np.ndarray, dtype: str,
               flops: float, settings: Settings) -> dict:
    encode, decode, data_type, tolerance = _dtypes()[dtype]
    n = a.shape[0]
    a_card, b_card = encode(a), encode(b)
    a_memory, b_memory = runtime.upload(a_card), runtime.upload(b_card)
    c_memory = runtime.allocate(a_card.nbytes)
    runtime.activate()  # cuBLAS runs in the current context
    sample = timed_calls(handle.gemm_ex,
                         (n, n, n, int(a_memory), int(b_memory), int(c_memory), data_type),
                         lambda out: runtime.synchronize(), GEMM_CALLS)
    samples = settled_samples(sample, settings)
    c = np.empty_like(a_card)
    runtime.download(c_memory, c)
    rows = np.linspace(0, n - 1, CHECKED_ROWS).astype(int)
    expected = decode(a_card[rows]).astype(np.float64) @ decode(b_card).astype(np.float64)
    return gemm_rate_entry(decode(c[rows]), expected, tolerance, flops, samples)
