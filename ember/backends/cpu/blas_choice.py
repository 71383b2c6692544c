"""``config.blas = "auto"``: the GEMM generated code calls, chosen by measurement.

The candidates are Ember's own GEMM (ember_gemm.py) and each installed BLAS (OpenBLAS,
MKL). Which is fastest depends on the host, not on the vendor's name (MKL is the slower
one on AMD's Zen cores), and on the shape: Ember's narrow tile wins products one vector
wide where a BLAS's wide tile idles. So a short probe times every candidate on a few
products of each shape class of include/ember_gemm.h (``ember_gemm_class``), called as
generated code calls them (split over the same threads), and ``decide`` turns the rates
into what modules link: one BLAS and, for the classes Ember's GEMM won, its library too
(``-DEMBER_GEMM_OWN_CLASSES``).

Ember's GEMM takes part once its library is in the compile cache (toolchain.py's
``_measured_blas``: building it on a first run would cost seconds).

The rates are kept on disk beside the compiler probes (the compile cache's ``toolchain``
folder), keyed by what decides them: the CPU, the toolchain's target, the thread count
and each candidate's build; a damaged or foreign entry is measured again.
"""
from __future__ import annotations

import ctypes
import functools
import time
from dataclasses import dataclass

import numpy as np

from ember.backends.cpu import toolchain
from ember.backends.cpu.toolchain import BlasInfo, ProbeStats
from ember.runtime.compile_cache import default_cache, hash_key


@dataclass(frozen=True)
class Product:
    """One probe product, op(A) (m x k) @ op(B) (k x n): A stored transposed (a weight
    gradient, x.T @ dy), B stored transposed (x @ W.T), and ``linear``: a bias added and
    ReLU applied in the same call (a Linear layer's forward, with the epilogue a program
    fuses into its product: Ember's GEMM applies it in registers, a BLAS in passes over C
    after the call)."""

    m: int
    k: int
    n: int
    a_transposed: bool = False
    b_transposed: bool = False
    linear: bool = False


# The shape classes of ember_gemm.h, by their bit in EMBER_GEMM_OWN_CLASSES, and the
# products each is probed on, as a training step calls them: big enough to run at speed
# (about a millisecond or less), small enough that the whole probe takes a fraction of
# a second. The skinny class's are a small CNN's.
CLASS_BITS = {"wide": 1, "narrow": 2, "skinny": 4}
ALL_CLASSES = 7
PROBE_SHAPES = {"wide": (Product(384, 384, 384), Product(256, 784, 256, linear=True),
                         Product(784, 256, 256, a_transposed=True)),
                "narrow": (Product(1024, 512, 10),),
                "skinny": (Product(16, 4096, 27, b_transposed=True),
                           Product(1024, 144, 32, b_transposed=True),
                           Product(32, 1024, 144, b_transposed=True))}
# A vendor takes a class only where it measured faster than Ember's GEMM by more than
# this: its rate in a program can be far below the probe's, where Ember's is not.
# scipy-openblas32 (its Haswell kernels, on Zen 1) ran 128 x 64 over k = 256 on one
# thread at 12 GFLOP/s in a fresh process, and at 42 once it had run a product over
# k = 288 (a state of the library, not the operands' addresses: those were varied). The
# probe saw the fast state and measured the wide class 1.4% and the skinny class 8.7%
# faster than Ember's GEMM; the GPT block's programs, whose sums are over k = 64 and 256
# only, ran their products over k = 256 2.6-3.3x slower than Ember's GEMM does, and
# ResNet-18's skinny products ran 2.7x slower once its wide ones no longer went to
# OpenBLAS. Of eleven probes kept on these sessions' machines, none had the vendor win
# the wide class by more than 3%; a clear win (narrow and skinny classes, up to 1.9x)
# keeps it.
VENDOR_MARGIN = 0.10
PROBE_ROUNDS = 7  # best of, candidates interleaved (a busy neighbour slows all alike)
OWN = "ember"
_FORMAT = "ember-blas-choice/5"  # bump when the probe or the entry layout changes
_SUFFIX = ".blas-rates"  # (JSON entries of the compile cache)
_RELU = 1  # EMBER_ACTIVATION_RELU (ember_gemm.h)
_NO_TRANS, _TRANS = 111, 112  # (CBLAS's)

_PROBE_SOURCE = """
#include "ember_gemm.h"
/* c = activation(op(a) @ op(b) + row) (row-major, contiguous; a is m x k, or k x m read
   transposed where ta is 112; b is k x n, or n x k where tb is 112; row, n values, or
   null), split as generated code splits it. */
void ember_blas_probe(int split, int parts, int ta, int tb, int64_t m, int64_t n, int64_t k,
                      const float *a, const float *b, float *c, const float *row,
                      int activation) {
  int64_t lda = ta == 112 ? m : k, a_row_step = ta == 112 ? 1 : k;
  int64_t ldb = tb == 112 ? k : n, b_col_step = tb == 112 ? k : 1;
  ember_gemm_f32(split, parts, 1, &(ember_batch){0, 0, 0, 0, 0}, ta, tb, m, n, k, a, lda,
                 a_row_step, b, ldb, b_col_step, c, n, 1.0f, 0, 0.0f, row, 1.0f, activation,
                 0);
}
"""


probe_stats = ProbeStats()  # (what the choice did in this process)
Rates = dict[str, dict[str, float]]  # shape class -> candidate -> GFLOP/s


@dataclass(frozen=True)
class Choice:
    """What modules link: ``blas`` (a vendor's name, or None for Ember's GEMM alone) and
    the shape classes Ember's GEMM computes (bits of ``CLASS_BITS``)."""

    blas: str | None
    own_classes: int


def decide(rates: Rates) -> Choice:
    """The fastest candidate per shape class. Modules link one vendor BLAS at most: the
    vendor fastest on the wide class (where the flops are); each class then takes that
    vendor where it measured faster than Ember's GEMM by more than ``VENDOR_MARGIN``,
    else Ember's GEMM."""
    vendors = sorted({name for by_name in rates.values() for name in by_name} - {OWN})
    if not vendors:
        return Choice(None, ALL_CLASSES)
    wide = rates.get("wide", {})
    vendor = max(vendors, key=lambda name: (wide.get(name, 0.0), name))
    own = 0
    for shape_class, bit in CLASS_BITS.items():
        by_name = rates.get(shape_class, {})
        if by_name.get(vendor, 0.0) <= by_name.get(OWN, 0.0) * (1 + VENDOR_MARGIN):
            own |= bit
    return Choice(None if own == ALL_CLASSES else vendor, own)


def auto_choice(candidates: dict[str, BlasInfo], threads: int, target_isa: str,
                cpu: str | None) -> Choice:
    """The choice among ``candidates`` (the vendors installed and, where there is a
    compiler, ``OWN``: Ember's GEMM), measured once per host and kept on disk."""
    vendors = sorted(set(candidates) - {OWN})
    if OWN not in candidates or not vendors:  # (nothing to measure; MKL first, unmeasured)
        return Choice(vendors[0] if vendors else None, 0 if vendors else ALL_CLASSES)
    key = hash_key([_FORMAT, target_isa, cpu or "unknown-cpu", f"threads={threads}",
                    *(f"{name}={info.version}" for name, info in sorted(candidates.items()))])
    return decide(_rates(key, tuple(sorted(candidates.items())), threads))


@functools.lru_cache(maxsize=None)
def _rates(key: str, candidates: tuple[tuple[str, BlasInfo], ...], threads: int) -> Rates:
    try:
        cache = default_cache()
    except OSError:  # (no cache directory: measured in every process)
        return _measure(dict(candidates), threads)
    rates, stored = cache.answer([_FORMAT, key], _SUFFIX,
                                 lambda: _measure(dict(candidates), threads), is_rates)
    if stored:
        probe_stats.disk_hits += 1
    return rates


def is_rates(stored: object) -> bool:
    """Whether a stored entry is a table of rates: GFLOP/s by library, for every class."""
    if not isinstance(stored, dict) or set(stored) != set(CLASS_BITS):
        return False
    return all(isinstance(by_name, dict) and by_name and all(
                   isinstance(rate, (int, float)) and rate >= 0 for rate in by_name.values())
               for by_name in stored.values())


def _measure(candidates: dict[str, BlasInfo], threads: int) -> Rates:
    """GFLOP/s of every candidate on every class's probe products (best of the rounds,
    summed over a class's products as one rate)."""
    probe_stats.runs += 1
    functions = {name: _probe_function(info) for name, info in candidates.items()}
    rng = np.random.default_rng(0)
    rates: Rates = {}
    for shape_class, shapes in PROBE_SHAPES.items():
        flops = sum(2.0 * p.m * p.k * p.n for p in shapes)
        best = {name: [float("inf")] * len(shapes) for name in candidates}
        operands = [(p, rng.standard_normal((p.k, p.m) if p.a_transposed else (p.m, p.k),
                                            dtype=np.float32),
                     rng.standard_normal((p.n, p.k) if p.b_transposed else (p.k, p.n),
                                         dtype=np.float32),
                     np.empty((p.m, p.n), np.float32),
                     rng.standard_normal(p.n, dtype=np.float32) if p.linear else None)
                    for p in shapes]
        for _ in range(PROBE_ROUNDS):
            for name, function in functions.items():
                for index, operand in enumerate(operands):
                    best[name][index] = min(best[name][index],
                                            _time(function, *operand, threads))
        rates[shape_class] = {name: flops / sum(times) / 1e9 for name, times in best.items()}
    return rates


def _time(function, product: Product, a: np.ndarray, b: np.ndarray, c: np.ndarray,
          bias: np.ndarray | None, threads: int) -> float:
    """Seconds of one call on idle cores, estimated as the process's CPU time over the
    threads it used: time the cores spent on others' processes (a shared, busy host)
    does not count against the candidate that happened to run then."""
    from ember.codegen import c_gemm
    from ember.codegen.gemm import GemmPlan, Matrix

    p, ta, tb = product, product.a_transposed, product.b_transposed
    plan = GemmPlan(np.dtype(np.float32), (), p.m, p.n, p.k,
                    Matrix(p.m, p.k, ta, p.m if ta else p.k, 0, ()),
                    Matrix(p.k, p.n, tb, p.k if tb else p.n, 0, ()))
    split, parts = c_gemm.gemm_split(plan, threads)
    start = time.process_time()
    function(split, parts, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS, p.m, p.n,
             p.k, a.ctypes.data, b.ctypes.data, c.ctypes.data,
             None if bias is None else bias.ctypes.data, _RELU if p.linear else 0)
    return max(time.process_time() - start, 1e-9) / parts


def _probe_function(info: BlasInfo):
    """``ember_blas_probe`` built against the GEMM of ``info`` alone."""
    path = toolchain.compile_shared_library(_PROBE_SOURCE, name=f"blas_probe_{info.name}",
                                            blas_info=info)
    function = toolchain.load_library(path).ember_blas_probe
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64,
                         pointer, pointer, pointer, pointer, ctypes.c_int]
    function.restype = None
    return function
