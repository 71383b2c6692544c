"""Matmuls through cuBLAS on the runtime's stream, when the library is present.

A GEMM step of a device program is a ``GemmPlan``: row-major, strided operands and a
row-major, strided output. cuBLAS is column-major; a row-major ``C = A @ B`` is the column-major
``C^T = B^T @ A^T``, and a row-major matrix read with its leading dimension *is* its own
transpose in column-major terms, so the call swaps the operands and keeps every leading
dimension (``cublas_gemm`` below). A plan whose batch axes do not collapse into one
stride per operand (or for the output), or whose dtype cuBLAS does not take here, runs as the generated
GEMM kernel instead (the program always carries it, so kernel counts and sources do not
depend on the library).

The library comes from the ``nvidia-cublas`` wheel (``pip install 'ember[cuda]'``) or the
system; without it, every GEMM is the generated kernel. Like the rest of the CUDA run
path, this was written against the documented API and tested against a stand-in that
implements cuBLAS's column-major semantics; it has not yet run on a GPU.
"""
from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember.codegen.gemm import GemmPlan, Matrix, collapse

_OP_N, _OP_T = 0, 1  # cublasOperation_t
CUDA_R_32F, CUDA_R_16BF = 0, 14  # cudaDataType_t
_COMPUTE_32F, _GEMM_DEFAULT = 68, -1  # cublasComputeType_t, cublasGemmAlgo_t
_FUNCTIONS = {np.dtype(np.float32): ("cublasSgemmStridedBatched", ctypes.c_float),
              np.dtype(np.float64): ("cublasDgemmStridedBatched", ctypes.c_double)}


@dataclass(frozen=True)
class CublasGemm:
    """The arguments of one ``cublas?gemmStridedBatched`` call (offsets in elements)."""

    function: str
    scalar: type  # ctypes type of alpha and beta
    transa: int
    transb: int
    m: int
    n: int
    k: int
    a_offset: int  # cuBLAS's A is our B
    lda: int
    stride_a: int
    b_offset: int  # cuBLAS's B is our A
    ldb: int
    stride_b: int
    c_offset: int
    ldc: int
    stride_c: int
    batch: int


def cublas_gemm(plan: GemmPlan) -> CublasGemm | None:
    """The cuBLAS call computing ``plan``, or None when it has no single such call."""
    batch = int(np.prod(plan.batch, dtype=np.int64))
    if plan.dtype not in _FUNCTIONS or 0 in (plan.m, plan.n, plan.k, batch):
        return None
    out = plan.output
    batches = [collapse(plan.batch, matrix.batch_strides) for matrix in (plan.a, plan.b, out)]
    if None in batches:  # (the flattened batch axes need one stride per operand)
        return None
    strides = [stride for _, stride in batches]
    function, scalar = _FUNCTIONS[plan.dtype]
    return CublasGemm(
        function, scalar, transa=_op(plan.b), transb=_op(plan.a), m=plan.n, n=plan.m, k=plan.k,
        a_offset=plan.b.offset, lda=plan.b.ld, stride_a=strides[1],
        b_offset=plan.a.offset, ldb=plan.a.ld, stride_b=strides[0],
        c_offset=out.offset, ldc=out.ld, stride_c=strides[2], batch=batch)


def _op(matrix: Matrix) -> int:
    # A row-major matrix seen column-major is its transpose: the untransposed operand
    # already is what the swapped product needs.
    return _OP_T if matrix.transposed else _OP_N


@functools.cache
def load_library() -> Any | None:
    """libcublas (CUDA 13) from the nvidia-cublas wheel or the system; None if absent."""
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _candidates() -> list[str]:
    paths = []
    try:
        import nvidia.cu13
        paths += [os.path.join(folder, "lib", "libcublas.so.13") for folder in nvidia.cu13.__path__]
    except ImportError:
        pass
    return paths + ["libcublas.so.13"]


class Cublas:
    """One cuBLAS handle bound to a runtime's stream (the caller makes its context current)."""

    def __init__(self, library: Any, stream: int) -> None:
        self.library = library
        handle = ctypes.c_void_p()
        _check(library.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle
        _check(library.cublasSetStream_v2(handle, ctypes.c_void_p(stream)), "cublasSetStream")

    def gemm(self, call: CublasGemm, a: int, b: int, c: int, itemsize: int) -> None:
        """Run ``call`` on device pointers: ``a``, ``b`` our operands, ``c`` the output."""
        function: Callable = getattr(self.library, call.function)
        one, zero = call.scalar(1), call.scalar(0)
        pointer, i64 = ctypes.c_void_p, ctypes.c_longlong
        _check(function(
            self.handle, call.transa, call.transb, call.m, call.n, call.k, ctypes.byref(one),
            pointer(b + call.a_offset * itemsize), call.lda, i64(call.stride_a),
            pointer(a + call.b_offset * itemsize), call.ldb, i64(call.stride_b),
            ctypes.byref(zero), pointer(c + call.c_offset * itemsize), call.ldc,
            i64(call.stride_c), call.batch),
            call.function)

    def gemm_ex(self, m: int, n: int, k: int, a: int, b: int, c: int, data_type: int) -> None:
        """Row-major ``c = a @ b`` of packed (m, k) and (k, n) operands through
        ``cublasGemmEx``: operands and result of ``data_type`` (``CUDA_R_32F`` or
        ``CUDA_R_16BF``), products summed in float32 (plain float32 for float32 operands: no
        TF32). As in ``cublas_gemm``, the column-major call is ``c^T = b^T @ a^T``."""
        one, zero = ctypes.c_float(1), ctypes.c_float(0)
        pointer = ctypes.c_void_p
        _check(self.library.cublasGemmEx(
            self.handle, _OP_N, _OP_N, n, m, k, ctypes.byref(one), pointer(b), data_type, n,
            pointer(a), data_type, k, ctypes.byref(zero), pointer(c), data_type, n,
            _COMPUTE_32F, _GEMM_DEFAULT), "cublasGemmEx")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with cuBLAS status {status}")
