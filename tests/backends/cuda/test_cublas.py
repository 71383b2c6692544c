"""cuBLAS for the CUDA backend's GEMMs, without a GPU: the row-major -> column-major
mapping of every operand layout is checked against a stand-in that computes what cuBLAS
documents (column-major, op(A) @ op(B), strided batches), and the run path against the
fake driver of test_cuda_driver_plumbing."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import ember
from ember.backends.cuda import cublas
from ember.backends.cuda.nvrtc import nvrtc_version
from ember.codegen.gemm import GemmPlan

from test_cuda_driver_plumbing import fake_gpu  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(nvrtc_version() is None, reason="NVRTC is not installed")

RNG = np.random.default_rng(0)


def _column_major(flat: np.ndarray, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
    item = flat.itemsize
    return as_strided(flat[offset:], shape=(rows, cols), strides=(item, ld * item))


def reference_cublas(call: cublas.CublasGemm, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """What cuBLAS computes for ``call``, given our A and B as flat arrays (cuBLAS's A is
    our B and the other way round, as the call says)."""
    for i in range(call.batch):
        rows, cols = (call.m, call.k) if call.transa == 0 else (call.k, call.m)
        op_a = _column_major(b, call.a_offset + i * call.stride_a, rows, cols, call.lda)
        op_a = op_a if call.transa == 0 else op_a.T
        rows, cols = (call.k, call.n) if call.transb == 0 else (call.n, call.k)
        op_b = _column_major(a, call.b_offset + i * call.stride_b, rows, cols, call.ldb)
        op_b = op_b if call.transb == 0 else op_b.T
        out = _column_major(c, call.c_offset + i * call.stride_c, call.m, call.n, call.ldc)
        out[...] = op_a @ op_b


def _gemm_plans(f, *args) -> list[GemmPlan]:
    return [plan for plan, _ in _gemm_launches(f, *args)]


def _gemm_launches(f, *args) -> list[tuple[GemmPlan, tuple[int, int]]]:
    """Each GEMM's plan, and which arguments of ``f`` are its A and B (a plan writing a
    transposed product computes C^T = B^T A^T: its A is then ``f``'s second operand)."""
    compiled = ember.jit(f, backend="cuda").lower(*args).compile()
    inputs = compiled.executable.program.optimized.inputs
    return [(launch.gemm, tuple(inputs.index(v) for v in launch.args[:2]))
            for step in compiled.executable.program.steps
            for launch in step.launches if launch.gemm is not None]


def _matrix(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


LAYOUTS = {
    "a @ b": (lambda a, b: a @ b, (_matrix(40, 48), _matrix(48, 56))),
    "a.T @ b": (lambda a, b: a.T @ b, (_matrix(48, 40), _matrix(48, 56))),
    "a @ b.T": (lambda a, b: a @ b.T, (_matrix(40, 48), _matrix(56, 48))),
    "a.T @ b.T": (lambda a, b: a.T @ b.T, (_matrix(48, 40), _matrix(56, 48))),
    "batched": (lambda a, b: a @ b, (_matrix(3, 32, 40), _matrix(3, 40, 24))),
    "batched, transposed": (lambda a, b: ember.numpy.einsum("bkm,bnk->bmn", a, b),
                            (_matrix(3, 40, 32), _matrix(3, 24, 40))),
    "two batch axes": (lambda a, b: a @ b, (_matrix(2, 3, 32, 40), _matrix(2, 3, 40, 24))),
    "float64": (lambda a, b: a @ b, (_matrix(40, 48, dtype=np.float64),
                                     _matrix(48, 56, dtype=np.float64))),
    "slice of a buffer": (lambda a, b: a[8:40] @ b, (_matrix(48, 48), _matrix(48, 32))),
    # the product written through its consumer's transpose: ldc 6 * 24, batch stride 24
    "into a transposed layout": (
        lambda a, b: ember.numpy.transpose(a @ b, (1, 0, 2)),
        (_matrix(6, 32, 40), _matrix(6, 40, 24))),
    # ... and with the matrices transposed: the operands swap
    "into transposed matrices": (
        lambda a, b: ember.numpy.transpose(a @ b, (2, 0, 1)),
        (_matrix(6, 32, 40), _matrix(6, 40, 24))),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_the_cublas_call_computes_the_plan(name, x64):
    f, args = LAYOUTS[name]
    ((plan, (first, second)),) = _gemm_launches(f, *args)
    call = cublas.cublas_gemm(plan)
    assert call is not None
    expected = np.asarray(ember.jit(f, backend="reference")(*args))
    out = np.zeros(expected.size, expected.dtype)
    reference_cublas(call, args[first].ravel(), args[second].ravel(), out)
    np.testing.assert_allclose(out.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


def test_batch_axes_that_do_not_collapse_use_the_generated_kernel():
    # b's two batch axes come in swapped order: no single stride walks them
    a, b = _matrix(2, 3, 16, 40), _matrix(3, 2, 40, 16)
    (plan,) = _gemm_plans(lambda a, b: a @ b.transpose(1, 0, 2, 3), a, b)
    assert cublas.cublas_gemm(plan) is None


class FakeCublas:
    """cuBLAS's entry points over the fake driver's host-backed "device" memory."""

    def __init__(self) -> None:
        self.streams: list[int] = []
        self.calls = 0

    def cublasCreate_v2(self, handle):
        ctypes.cast(handle, ctypes.POINTER(ctypes.c_void_p))[0] = 0x1234
        return 0

    def cublasSetStream_v2(self, handle, stream):
        self.streams.append(stream.value)
        return 0

    def cublasSgemmStridedBatched(self, handle, transa, transb, m, n, k, alpha, a, lda,
                                  stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch):
        self.calls += 1
        assert (alpha._obj.value, beta._obj.value) == (1.0, 0.0)
        call = cublas.CublasGemm("", ctypes.c_float, transa, transb, m, n, k, 0, lda,
                                 stride_a.value, 0, ldb, stride_b.value, 0, ldc,
                                 stride_c.value, batch)
        size = 1 << 16  # elements each pointer may reach (the test's operands are small)
        view = lambda pointer: np.ctypeslib.as_array(  # noqa: E731
            (ctypes.c_float * size).from_address(pointer.value))
        # reference_cublas takes (our A, our B): cuBLAS's B pointer, then its A pointer
        reference_cublas(call, view(b), view(a), view(c))
        return 0


def test_a_matmul_on_the_gpu_runs_through_cublas(fake_gpu, monkeypatch):  # noqa: F811
    library = FakeCublas()
    monkeypatch.setattr(cublas, "load_library", lambda: library)
    fake_gpu.arity = 3
    a, b = _matrix(32, 48), _matrix(64, 48)
    out = ember.jit(lambda a, b: a @ b.T, backend="cuda")(a, b)
    assert library.calls == 1 and library.streams == [int(ember.devices("cuda")[0].backend
                                                          .runtime(ember.devices("cuda")[0])
                                                          .stream)]
    assert fake_gpu.launches == []  # the generated GEMM kernel did not run
    np.testing.assert_allclose(np.asarray(out), a @ b.T, rtol=1e-5, atol=1e-5)


def test_without_cublas_the_generated_kernel_is_launched(fake_gpu, monkeypatch):  # noqa: F811
    monkeypatch.setattr(cublas, "load_library", lambda: None)
    fake_gpu.arity = 3
    a, b = _matrix(32, 48), _matrix(48, 64)
    compiled = ember.jit(lambda a, b: a @ b, backend="cuda").lower(a, b).compile()
    compiled(a, b)
    (gemm_kernel,) = [k.name for k in compiled.kernels]
    assert [launch[0] for launch in fake_gpu.launches] == [gemm_kernel]
