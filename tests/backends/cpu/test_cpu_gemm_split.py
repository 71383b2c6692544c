"""GEMMs split across threads (c_gemm._split): which split each shape gets, and every
split jitted on 'cpu' against the reference backend (through each BLAS installed), with 3
threads so that the parts are uneven and the operands transposed, strided and offset."""
from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_testing import assert_matches_reference, compiled, requires_cpu

import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import toolchain
from ember.codegen.c_gemm import _split
from ember.codegen.gemm import GemmPlan, Matrix
from ember.config import config

pytestmark = requires_cpu

rng = np.random.default_rng(0)
TOLERANCE = (1e-4, 1e-4)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def plan(batch: tuple[int, ...], m: int, n: int, k: int, a_transposed: bool = False,
         dtype: type = np.float32) -> GemmPlan:
    strides = tuple(1 for _ in batch)
    a = Matrix(m, k, True, m, 0, strides) if a_transposed else Matrix(m, k, False, k, 0, strides)
    return GemmPlan(np.dtype(dtype), batch, m, n, k, a, Matrix(k, n, False, n, 0, strides))


@pytest.mark.parametrize("batch, m, n, k, threads, expected", [
    ((), 512, 256, 256, 2, ("m", 2)),           # tall: blocks of rows
    ((), 256, 1024, 784, 2, ("n", 2)),          # wide: blocks of columns
    ((), 256, 1024, 784, 1, ("batch", 1)),      # one thread
    ((), 40, 32, 64, 2, ("batch", 1)),          # too small to be worth a split
    ((), 64, 48, 1024, 4, ("m", 2)),            # at least 32 rows per thread
    ((64,), 256, 256, 64, 2, ("batch", 2)),     # many items: by items
    ((9,), 128, 128, 128, 2, ("batch", 2)),     # 5 vs 4.5 items: close enough
    ((3,), 128, 128, 128, 2, ("m", 2)),         # 2 vs 1 items: split each item
    ((4,), 128, 128, 128, 3, ("m", 3)),
    ((2, 3), 128, 128, 128, 3, ("batch", 3)),
    ((), 16, 27, 4096, 2, ("k", 2)),            # too few rows and columns: over the sum
    ((), 40, 40, 700, 4, ("k", 4)),
    ((), 40, 40, 700, 8, ("k", 5)),             # at least 128 of the sum per thread
    ((2,), 16, 27, 4096, 2, ("batch", 2)),      # (items first)
])
def test_split(batch, m, n, k, threads, expected):
    assert _split(plan(batch, m, n, k), int(np.prod(batch, dtype=np.int64)), threads) == expected


@pytest.mark.parametrize("m, n, k, threads, dtype, expected", [
    (784, 1024, 256, 2, np.float32, ("m", 2)),   # a weight gradient's short sum: rows
    (512, 2048, 512, 2, np.float64, ("m", 2)),
    (384, 1024, 256, 3, np.float32, ("m", 3)),   # 128 rows per thread
    (512, 4608, 8, 2, np.float32, ("m", 2)),     # (a ResNet's convolution)
    (784, 1024, 1024, 2, np.float32, ("n", 2)),  # a longer sum: the wider side
    (64, 256, 256, 2, np.float32, ("n", 2)),     # too few rows for a large block each
    (300, 1024, 256, 3, np.float32, ("n", 3)),
    (784, 1024, 256, 2, np.float16, ("n", 2)),   # 16-bit operands: not measured
])
def test_split_with_a_transposed(m, n, k, threads, dtype, expected):
    assert _split(plan((), m, n, k, a_transposed=True, dtype=dtype), 1, threads) == expected


def _dot(dims):
    return lambda a, b: lax.dot_general(a, b, dims)


@pytest.mark.parametrize("lhs_shape, rhs_shape, dims", [
    ((200, 96), (96, 112), (((1,), (0,)), ((), ()))),           # rows
    ((96, 200), (96, 112), (((0,), (0,)), ((), ()))),           # rows, transposed lhs
    ((64, 400), (64, 500), (((0,), (0,)), ((), ()))),           # rows of a wide one, too
    ((100, 96), (250, 96), (((1,), (1,)), ((), ()))),           # columns, transposed rhs
    ((96, 100), (250, 96), (((0,), (1,)), ((), ()))),           # columns, both transposed
    ((7, 64, 64), (7, 64, 48), (((2,), (1,)), ((0,), (0,)))),   # by items (3, 2, 2)
    ((80, 2, 96), (2, 96, 100), (((2,), (1,)), ((1,), (0,)))),  # each item, strided batch
    ((3000, 16), (3000, 27), (((0,), (0,)), ((), ()))),         # over the sum, transposed lhs
    ((20, 3000), (24, 3000), (((1,), (1,)), ((), ()))),         # over the sum, transposed rhs
])
@pytest.mark.parametrize("blas", ["openblas", "mkl"])
def test_split_gemm_matches_reference(lhs_shape, rhs_shape, dims, blas):
    with config.override(blas=blas):
        if toolchain.blas() is None:
            pytest.skip(f"the {blas} BLAS is not installed")
    lhs, rhs = randn(*lhs_shape), randn(*rhs_shape)
    with config.override(num_threads=3, blas=blas):
        assert_matches_reference(_dot(dims), lhs, rhs, tolerance=TOLERANCE)
        (kernel,) = compiled(_dot(dims), lhs, rhs).kernels
    assert kernel.kind == "library"
    split, parts = re.match(r"ember_gemm_f32\((\d), (\d+),", kernel.source).groups()
    assert int(parts) > 1  # the product really was split (by items, rows, columns or k)


def test_split_gemm_with_epilogue_and_sliced_operand():
    """A product of a slice (an offset operand) whose bias and relu run after the split."""
    x, w, bias = randn(130, 300), randn(256, 120), randn(120)

    def layer(x, w, bias):
        return jnp.maximum(x[:, 44:] @ w + bias, 0.0)

    with config.override(num_threads=3):
        assert_matches_reference(layer, x, w, bias, tolerance=TOLERANCE)
        kinds = [k.kind for k in compiled(layer, x, w, bias).kernels]
    assert kinds == ["library"]


@pytest.mark.parametrize("blas", ["ember", "openblas"])
def test_sum_split_gemm_with_epilogue(blas):
    """A weight gradient's shape (16 x 27 over k = 3000) split over its sum on 3 threads
    (blocks of 1000), with an addend, bias and relu applied once, to the whole sum."""
    with config.override(blas=blas):
        if toolchain.blas() is None:
            pytest.skip(f"the {blas} GEMM is not available")
    x, w, d, bias = randn(3000, 16), randn(3000, 27), randn(16, 27), randn(27)

    def update(x, w, d, bias):
        return jnp.maximum(x.T @ w + d + bias, 0.0)

    with config.override(num_threads=3, blas=blas):
        assert_matches_reference(update, x, w, d, bias, tolerance=(1e-4, 1e-3))
        (kernel,) = compiled(update, x, w, d, bias).kernels
    assert re.search(r"ember_gemm_f32\(3, 3,", kernel.source)
