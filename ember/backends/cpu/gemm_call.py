"""A GEMM plan as CBLAS calls, split across OpenMP threads.

Every call runs OpenBLAS single-threaded (its thread count is set to 1 around the calls
and restored after) and the work is split by OpenMP, the same thread pool as the fused
kernels: two pools on the same cores (OpenBLAS's threads spinning while OpenMP's do, and
the reverse) cost more than either saves, most of all when cores are shared. A batch is
split by items when that keeps the threads about equally busy; otherwise (one product,
or a few: 3 items on 2 threads) every product is split by blocks of rows, or of columns
when it is wide (each thread then repacks the smaller operand). One static block per
thread: on 2 cores that ran at the rate of OpenBLAS's own threads (within noise), and
smaller blocks handed out dynamically were 5-15% slower and no faster beside other
busy processes.
"""
from __future__ import annotations

import numpy as np

from ember.codegen.gemm import GemmPlan, Matrix

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
MIN_PARALLEL_FLOPS = 1 << 21
MIN_BLOCK = 32  # rows or columns per thread
# A batch split by items may leave one thread this much more work than an even split
# (9 items on 2 threads: 5 vs 4.5); beyond that every item is split instead.
MAX_BATCH_IMBALANCE = 0.125


def render_gemm(plan: GemmPlan, a: str, b: str, c: str, ctype: str, prefix: str,
                threads: int) -> list[str]:
    """C statements computing ``C = A @ B`` for every batch item."""
    count = int(np.prod(plan.batch, dtype=np.int64))
    head = f"{{ const {ctype} *A = {a}, *B = {b}; {ctype} *C = {c};"
    if plan.m == 0 or plan.n == 0 or count == 0:
        return [head, "}"]
    if plan.k == 0:
        return [head, f"  memset(C, 0, sizeof({ctype}) * {count * plan.m * plan.n}); }}"]
    axis, parts = _split(plan, count, threads)
    lines = [head, f"  const int saved_threads = {prefix}openblas_get_num_threads();",
             f"  {prefix}openblas_set_num_threads(1);"]
    if parts > 1:
        lines.append(f"  #pragma omp parallel for num_threads({parts}) schedule(static)")
    lines.append(f"  for (int64_t part = 0; part < {parts}; part++) {{")
    lines += ["    " + line for line in _part_body(plan, axis, parts, count, prefix)]
    return lines + ["  }", f"  {prefix}openblas_set_num_threads(saved_threads);", "}"]


def _split(plan: GemmPlan, count: int, threads: int) -> tuple[str, int]:
    """(what to split: "batch", "m" or "n"; into how many parts)."""
    if threads <= 1 or plan.flops < MIN_PARALLEL_FLOPS:
        return "batch", 1
    axis, size = ("m", plan.m) if plan.m >= plan.n else ("n", plan.n)
    within = max(1, min(threads, size // MIN_BLOCK))
    by_items = min(count, threads)
    busiest = -(-count // by_items)  # items of the busiest thread
    if count / busiest * (1 + MAX_BATCH_IMBALANCE) >= within:
        return "batch", by_items
    return axis, within


def _part_body(plan: GemmPlan, axis: str, parts: int, count: int, prefix: str) -> list[str]:
    function = f"{prefix}cblas_{'s' if plan.dtype == np.float32 else 'd'}gemm"
    a_off, b_off = _batch_offset(plan.a, plan), _batch_offset(plan.b, plan)
    c_off = f"{plan.m * plan.n} * bt"
    m, n = str(plan.m), str(plan.n)
    if axis == "batch":
        first, last = f"part * {count} / {parts}", f"(part + 1) * {count} / {parts}"
        loop = f"for (int64_t bt = {first}; bt < {last}; bt++)"
        prologue = []
    else:
        size = plan.m if axis == "m" else plan.n
        prologue = [(f"const int64_t lo = part * {size} / {parts}, "
                     f"hi = (part + 1) * {size} / {parts};")]
        loop = f"for (int64_t bt = 0; bt < {count}; bt++)"
        if axis == "m":
            a_off += f" + lo * {1 if plan.a.transposed else plan.a.ld}"
            c_off += f" + lo * {plan.n}"
            m = "(hi - lo)"
        else:
            b_off += f" + lo * {plan.b.ld if plan.b.transposed else 1}"
            c_off += " + lo"
            n = "(hi - lo)"
    call = (f"{function}({_ROW_MAJOR}, {_trans(plan.a)}, {_trans(plan.b)}, {m}, {n}, "
            f"{plan.k}, 1, A + {a_off}, {plan.a.ld}, B + {b_off}, {plan.b.ld}, 0, "
            f"C + {c_off}, {plan.n});")
    return [*prologue, f"{loop} {{", f"  {call}", "}"]


def _trans(matrix: Matrix) -> int:
    return _TRANS if matrix.transposed else _NO_TRANS


def _batch_offset(matrix: Matrix, plan: GemmPlan) -> str:
    """Element offset of batch item ``bt`` (row-major over the batch axes)."""
    terms = [str(matrix.offset)]
    stride = 1
    for extent, step in reversed(list(zip(plan.batch, matrix.batch_strides))):
        if extent > 1 and step:
            terms.append(f"(bt / {stride} % {extent}) * {step}")
        stride *= extent
    return "(" + " + ".join(terms) + ")"
