"""A GEMM plan as CBLAS calls, split across OpenMP threads.

Every call runs OpenBLAS single-threaded (its thread count is set to 1 around the calls
and restored after) and the work is split by OpenMP, the same thread pool as the fused
kernels: two pools on the same cores (OpenBLAS's threads spinning while OpenMP's do, and
the reverse) cost more than either saves, most of all when cores are shared. A batch is
split by items when that keeps the threads about equally busy; otherwise (one product,
or a few: 3 items on 2 threads) every product is split by blocks of rows, or of columns
when it is wide (each thread then repacks the smaller operand), but by rows where A is
stored transposed, the sum is short and there are rows enough (a weight gradient:
measured faster). A single product with too few rows and columns for a block of each per
thread (a convolution's weight gradient: 16 x 27 over k = 4096) is split over its sum
instead, each thread summing a block of k into partial sums added after (Zen 4, 2
threads: 1.4-1.5x one thread's rate; where blocks of rows were possible they were
faster, 64 x 48 over k = 1024 at 103 GFLOP/s against 90). One static block per thread:
on 2 cores that ran at the rate of OpenBLAS's own threads (within noise), and smaller
blocks handed out dynamically were 5-15% slower and no faster beside other busy
processes.
"""
from __future__ import annotations

import numpy as np

from ember.codegen.gemm import GemmPlan, Matrix
from ember.codegen.gemm_activation import ACTIVATIONS

_NO_TRANS, _TRANS = 111, 112  # CBLAS enum values
MIN_PARALLEL_FLOPS = 1 << 21
MIN_BLOCK = 32  # rows or columns per thread
# A batch split by items may leave one thread this much more work than an even split
# (9 items on 2 threads: 5 vs 4.5); beyond that every item is split instead.
MAX_BATCH_IMBALANCE = 0.125
# A single product too small in m and n for blocks of MIN_BLOCK is split over k instead,
# in blocks of the sum at least this long.
MIN_SUM_BLOCK = 128
# With A stored transposed (a weight gradient, x^T @ dy) and a sum this short, blocks of
# rows beat blocks of columns even where there are more columns. Zen 4, 2 threads, the
# two splits alternated: Ember's GEMM in float32 over k = 256, 784 x 1024 1.12x,
# 1024 x 1024 1.15x, 512 x 768 1.21x, 512 x 2048 1.02x; over k = 512 0.99-1.08x; OpenBLAS
# 1.00-1.07x; float64 1.00-1.04x. Over longer sums neither split wins (k = 1024 and 2048:
# 0.97-1.07x), and the larger side is split, as for every other product. Nor with fewer
# rows than TRANSPOSED_A_MIN_ROWS a thread (the GPT block's 64 x 256 over k = 256: 0.96x;
# 128 x 4608 over k = 8: 0.99x, where 512 x 4608 ran 1.09x and 512 x 2304 1.19x).
TRANSPOSED_A_ROWS_MAX_K = 512
TRANSPOSED_A_MIN_ROWS = 128


def render_gemm(plan: GemmPlan, a: str, b: str, c: str, ctype: str, threads: int,
                alpha: float = 1.0, d: str = "0", d_scale: float = 0.0, row: str = "0",
                row_scale: float = 0.0, activation: str = "none", e: str = "0") -> list[str]:
    """C statements computing ``C = act(alpha * A @ B + d_scale * D + row_scale * row)``
    for every batch item (C laid out as ``plan.output``; ``d``: a pointer to D, laid out
    as C; ``row``: to n values broadcast down the rows; "0" for none; ``act``: one of
    ``gemm_activation.ACTIVATIONS``), or with ``e`` (a pointer to E, laid out as C)
    ``C = A @ B`` and ``E = act(...)`` of it: one call of the shared ``ember_gemm_*``
    helper (include/ember_gemm.h) with the split chosen here."""
    count = _count(plan)
    if plan.m == 0 or plan.n == 0 or count == 0:
        return []
    out = plan.output
    if plan.k == 0:
        if plan.c is not None or (alpha, d, row, activation, e) != (1.0, "0", "0", "none", "0"):
            raise AssertionError("internal error: an empty product with a layout or scale")
        return [f"memset({c}, 0, sizeof({ctype}) * {count * plan.m * plan.n});"]
    axis, parts = _split(plan, count, threads)
    batch = (f"&(ember_batch){{{len(plan.batch)}, {_int64s(plan.batch)}, "
             f"{_int64s(plan.a.batch_strides)}, {_int64s(plan.b.batch_strides)}, "
             f"{_int64s(out.batch_strides)}}}")
    a_row_step = 1 if plan.a.transposed else plan.a.ld
    b_col_step = plan.b.ld if plan.b.transposed else 1
    function = _FUNCTIONS[plan.operand_dtype.name, plan.dtype.name]
    if plan.casts:  # (float32 operands rounded as packed: include/ember_gemm.h)
        function += f"_cast_{plan.casts}"
    return [f"{function}({_SPLITS[axis]}, {parts}, {count}, {batch}, {_trans(plan.a)}, "
            f"{_trans(plan.b)}, {plan.m}, {plan.n}, {plan.k}, {a} + {plan.a.offset}, "
            f"{plan.a.ld}, {a_row_step}, {b} + {plan.b.offset}, {plan.b.ld}, {b_col_step}, "
            f"{c} + {out.offset}, {out.ld}, {alpha!r}, {d}, {d_scale!r}, {row}, "
            f"{row_scale!r}, {ACTIVATIONS[activation]}, {e});"]


def gemm_parts(plan: GemmPlan, threads: int) -> int:
    """How many threads ``render_gemm``'s call splits the work across."""
    return _split(plan, _count(plan), threads)[1]


def gemm_split(plan: GemmPlan, threads: int) -> tuple[int, int]:
    """(the ``split`` argument of ``render_gemm``'s call, its ``parts``), for callers of
    the ``ember_gemm_*`` functions outside generated code (probes, benchmarks)."""
    axis, parts = _split(plan, _count(plan), threads)
    return _SPLITS[axis], parts


def _count(plan: GemmPlan) -> int:
    return int(np.prod(plan.batch, dtype=np.int64))


_SPLITS = {"batch": 0, "m": 1, "n": 2, "k": 3}
# By the operands' and the results' dtype (16-bit operands: float32 products, or
# products rounded once to their own type; include/ember_gemm.h).
_FUNCTIONS = {("float32", "float32"): "ember_gemm_f32", ("float64", "float64"): "ember_gemm_f64",
              ("bfloat16", "float32"): "ember_gemm_bf16", ("float16", "float32"): "ember_gemm_f16",
              ("bfloat16", "bfloat16"): "ember_gemm_bf16_bf16",
              ("float16", "float16"): "ember_gemm_f16_f16"}


def _int64s(values) -> str:
    """A C compound literal of int64 values (a null pointer for none)."""
    if not len(values):
        return "0"
    return "(const int64_t[]){" + ", ".join(str(int(v)) for v in values) + "}"


def _split(plan: GemmPlan, count: int, threads: int) -> tuple[str, int]:
    """(what to split: "batch", "m", "n" or "k"; into how many parts)."""
    if threads <= 1 or plan.flops < MIN_PARALLEL_FLOPS:
        return "batch", 1
    by_rows = plan.m >= plan.n or _rows_of_transposed_a(plan, threads)
    axis, size = ("m", plan.m) if by_rows else ("n", plan.n)
    within = max(1, min(threads, size // MIN_BLOCK))
    over_sum = min(threads, plan.k // MIN_SUM_BLOCK)
    if count == 1 and within == 1 and over_sum > 1 and plan.dtype.itemsize >= 4:
        return "k", over_sum  # (16-bit results: their entry points have no split 3)
    by_items = min(count, threads)
    busiest = -(-count // by_items)  # items of the busiest thread
    if count / busiest * (1 + MAX_BATCH_IMBALANCE) >= within:
        return "batch", by_items
    return axis, within


def _rows_of_transposed_a(plan: GemmPlan, threads: int) -> bool:
    """Whether blocks of rows are the better split though there are more columns: A
    stored transposed, a short sum, and rows enough for a large block per thread
    (measured with 32- and 64-bit operands only)."""
    return (plan.a.transposed and plan.k <= TRANSPOSED_A_ROWS_MAX_K
            and plan.operand_dtype.itemsize >= 4
            and plan.m >= threads * TRANSPOSED_A_MIN_ROWS)


def _trans(matrix: Matrix) -> int:
    return _TRANS if matrix.transposed else _NO_TRANS
