"""Ember's own GEMM library (``blas="ember"``), called directly through the contract of
include/ember_gemm.h, against a float64 NumPy oracle: every dimension from 1 to 600
(the edges of the register tile and of the cache blocks included), leading dimensions
wider than the matrices, transposed operands, batches with their own strides, the split
over threads, and each term of the affine epilogue (alpha, an addend D, possibly C
itself, and a bias row) and the activation after it; float32, float64, and bfloat16 and
float16 operands with float32 sums and results (bfloat16 on AMX's tiles where the CPU
has them, and on vdpbf16ps's)."""
from __future__ import annotations

import ctypes
import platform
from dataclasses import dataclass

import hypothesis
import hypothesis.strategies as st
import ml_dtypes
import numpy as np
import pytest
import scipy.special

from ember.backends.cpu import ember_gemm, toolchain
from ember.backends.cpu.toolchain import cpu_flags
from ember.codegen.gemm_activation import ACTIVATIONS
from ember.config import config
from tests.backends.cpu.cpu_testing import requires_cpu

pytestmark = requires_cpu

_NO_TRANS, _TRANS = 111, 112
BF16, F16 = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)
# Each operand type's function (by operands and results) and the type of its sums.
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
_FUNCTIONS = {(F32, F32): ("ember_own_gemm_f32", F32), (F64, F64): ("ember_own_gemm_f64", F64),
              (BF16, F32): ("ember_own_gemm_bf16", F32), (F16, F32): ("ember_own_gemm_f16", F32),
              (BF16, BF16): ("ember_own_gemm_bf16_bf16", F32),
              (F16, F16): ("ember_own_gemm_f16_f16", F32)}


class _Batch(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("extents", ctypes.c_void_p),
                ("a_strides", ctypes.c_void_p), ("b_strides", ctypes.c_void_p),
                ("c_strides", ctypes.c_void_p)]


@pytest.fixture(scope="module")
def library() -> ctypes.CDLL:
    return toolchain.load_library(ember_gemm.library_path())


@dataclass(frozen=True)
class Case:
    m: int
    n: int
    k: int
    dtype: type = np.float32
    ta: bool = False
    tb: bool = False
    batch: tuple[int, ...] = ()
    pad: int = 0  # extra elements per row (leading dimensions) and per batch item
    split: int = 0  # 0: by items, 1: by rows, 2: by columns, 3: by blocks of k (ember_gemm.h)
    parts: int = 1
    alpha: float = 1.0
    addend: str = "none"  # "none", "separate" (D) or "in place" (D is C)
    d_scale: float = 0.0
    row_scale: float = 0.0  # 0: no bias row
    activation: str = "none"  # gemm_activation.ACTIVATIONS, applied last
    out: type | None = None  # the results' type: float32 for 16-bit operands, else theirs
    keep_product: bool = False  # C the plain product, E the epilogue's result
    cast: str = ""  # 16-bit operands stored as float32, cast as packed: "a", "b" or "ab"

    @property
    def result(self) -> np.dtype:
        if self.out is not None:
            return np.dtype(self.out)
        return F32 if np.dtype(self.dtype) in (BF16, F16) else np.dtype(self.dtype)


def _strided(rng: np.random.Generator, count: int, rows: int, cols: int, pad: int,
             dtype) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(flat buffer, the (count, rows, cols) view of it, leading dimension, item stride):
    rows `pad` elements longer than needed, items `pad` elements apart beyond that."""
    ld = cols + pad
    item = rows * ld + pad
    flat = rng.standard_normal(count * item + 1).astype(dtype)
    size = flat.itemsize
    view = np.lib.stride_tricks.as_strided(flat, (count, rows, cols), (item * size, ld * size, size))
    return flat, view, ld, item


def _element_indices(view: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """The positions in ``flat`` of the elements of ``view`` (a strided view of it)."""
    steps = [stride // flat.itemsize for stride in view.strides]
    grids = np.meshgrid(*[np.arange(n) for n in view.shape], indexing="ij")
    return sum(grid * step for grid, step in zip(grids, steps)).ravel()


def _batch_strides(extents: tuple[int, ...], item: int) -> list[int]:
    """Row-major strides over the batch axes of items `item` elements apart."""
    strides, step = [], item
    for extent in reversed(extents):
        strides.append(step)
        step *= extent
    return strides[::-1]


_ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "gelu_erfc": lambda x: 0.5 * x * scipy.special.erfc(-x / np.sqrt(2)),
}


def _int64s(values):
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def run_case(library: ctypes.CDLL, case: Case, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    count = int(np.prod(case.batch, dtype=np.int64))
    m, n, k, dtype = case.m, case.n, case.k, case.dtype
    result = case.result
    name, sums = _FUNCTIONS[(np.dtype(dtype), result)]
    name += f"_cast_{case.cast}" if case.cast else ""
    # op(A) is m x k: stored k x m when transposed; op(B) is k x n: stored n x k.
    a_flat, a_view, lda, a_item = _strided(rng, count, *((k, m) if case.ta else (m, k)),
                                           case.pad, F32 if "a" in case.cast else dtype)
    b_flat, b_view, ldb, b_item = _strided(rng, count, *((n, k) if case.tb else (k, n)),
                                           case.pad, F32 if "b" in case.cast else dtype)
    c_flat, c_view, ldc, c_item = _strided(rng, count, m, n, case.pad, result)
    # (a float32 operand of a cast: multiplied as the cast rounds it)
    op_a = (np.swapaxes(a_view, 1, 2) if case.ta else a_view).astype(dtype)
    op_b = (np.swapaxes(b_view, 1, 2) if case.tb else b_view).astype(dtype)

    product = np.matmul(op_a.astype(np.float64), op_b.astype(np.float64))
    product_bound = np.matmul(np.abs(op_a.astype(np.float64)), np.abs(op_b.astype(np.float64)))
    expected, bound = case.alpha * product, abs(case.alpha) * product_bound
    d_flat = None
    if case.addend == "separate":
        d_flat = rng.standard_normal(c_flat.size).astype(result)
    elif case.addend == "in place":
        assert not case.keep_product, "C is the product: it cannot be the addend too"
        d_flat = c_flat
    if d_flat is not None:
        d_view = np.lib.stride_tricks.as_strided(d_flat, c_view.shape, c_view.strides)
        expected = expected + case.d_scale * d_view.astype(np.float64)
        bound = bound + np.abs(case.d_scale * d_view.astype(np.float64))
    row = None
    if case.row_scale:
        row = rng.standard_normal(n).astype(result)
        expected = expected + case.row_scale * row.astype(np.float64)
        bound = bound + np.abs(case.row_scale * row.astype(np.float64))
    if d_flat is not c_flat:
        c_flat[:] = np.nan  # C is written, never read, when it is not the addend
    e_flat = np.full_like(c_flat, np.nan) if case.keep_product else None
    untouched = c_flat.copy()
    inside = np.zeros(c_flat.size, bool)
    inside[_element_indices(c_view, c_flat)] = True

    arrays = [_int64s(case.batch)] + [_int64s(_batch_strides(case.batch, item))
                                      for item in (a_item, b_item, c_item)]  # (kept alive)
    batch = _Batch(len(case.batch), *(ctypes.addressof(array) for array in arrays))

    real = ctypes.c_float if sums == np.float32 else ctypes.c_double
    function = getattr(library, name)
    pointer = ctypes.c_void_p
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, pointer, ctypes.c_int,
                         ctypes.c_int, *[ctypes.c_int64] * 3, pointer, ctypes.c_int64,
                         ctypes.c_int64, pointer, ctypes.c_int64, ctypes.c_int64, pointer,
                         ctypes.c_int64, real, pointer, real, pointer, real, ctypes.c_int,
                         pointer]
    function.restype = None
    function(case.split, case.parts, count, ctypes.byref(batch),
             _TRANS if case.ta else _NO_TRANS, _TRANS if case.tb else _NO_TRANS, m, n, k,
             a_flat.ctypes.data, lda, 1 if case.ta else lda, b_flat.ctypes.data, ldb,
             ldb if case.tb else 1, c_flat.ctypes.data, ldc, case.alpha,
             None if d_flat is None else d_flat.ctypes.data, case.d_scale,
             None if row is None else row.ctypes.data, case.row_scale,
             ACTIVATIONS[case.activation], None if e_flat is None else e_flat.ctypes.data)

    np.testing.assert_array_equal(c_flat[~inside], untouched[~inside],
                                  err_msg="wrote outside C's matrices")
    # (the operands' own rounding is in `expected`: the product of what they hold)
    epsilon = np.finfo(sums).eps
    tolerance = 2 * (k + 2) * epsilon * bound + np.finfo(sums).tiny
    if case.activation != "none":  # (a slope of at most 1.13; its own few ulp of |x| + 1)
        expected = _ACTIVATIONS[case.activation](expected)
        tolerance = 1.2 * tolerance + 8 * epsilon * (np.abs(expected) + 1)
    half_ulp = ml_dtypes.finfo(result).eps / 2 if result != sums else 0.0
    if case.keep_product:  # C: the product alone; E: the result, from C as stored
        _assert_close(case, c_flat, c_view, product, 2 * (k + 2) * epsilon * product_bound
                      + np.finfo(sums).tiny, half_ulp)
        np.testing.assert_array_equal(e_flat[~inside], untouched[~inside],
                                      err_msg="wrote outside E's matrices")
        _assert_close(case, e_flat, c_view, expected,
                      tolerance + 1.2 * half_ulp * abs(case.alpha) * product_bound, half_ulp)
    else:
        _assert_close(case, c_flat, c_view, expected, tolerance, half_ulp)


def _assert_close(case: Case, flat: np.ndarray, view: np.ndarray, expected: np.ndarray,
                  tolerance: np.ndarray, half_ulp: float) -> None:
    """The matrices of ``flat`` (laid out as ``view``) within ``tolerance`` of
    ``expected``, plus half an ulp where the results are rounded to 16 bits."""
    if half_ulp:
        tolerance = tolerance + half_ulp * (np.abs(expected) + tolerance) + float(
            ml_dtypes.finfo(flat.dtype).smallest_subnormal)
    got = np.lib.stride_tricks.as_strided(flat, view.shape, view.strides)
    error = np.abs(got.astype(np.float64) - expected)
    assert np.all(error <= tolerance), (
        f"{case}: max error {error.max():.3g} (tolerance there {tolerance.flat[error.argmax()]:.3g})")


# Sizes at the edges of the register tiles (6 x 64 float32 with AVX-512, 6 x 16 with
# AVX2; the narrow one 12 x 16, 12 x 8; the middle one 8 x 32) and of the cache blocks (NC
# 128 float32 / 64 float64; KC 1024 / 512: the sums past it below), primes.
EDGES = [1, 2, 5, 6, 7, 13, 17, 31, 33, 63, 65, 97, 127, 129, 255, 257, 401, 600]


@pytest.mark.parametrize("size", EDGES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_square_and_thin_products(library, size, dtype):
    run_case(library, Case(size, size, size, dtype))
    run_case(library, Case(size, 7, 3, dtype))
    run_case(library, Case(3, size, 7, dtype))
    run_case(library, Case(7, 3, size, dtype))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transposed_operands_with_leading_dimensions(library, ta, tb, dtype):
    for m, n, k in [(45, 67, 129), (200, 13, 400), (1, 601, 5), (37, 1, 1)]:
        run_case(library, Case(m, n, k, dtype, ta=ta, tb=tb, pad=3))


@pytest.mark.parametrize("split, parts", [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 2), (2, 3)])
def test_batches_split_over_threads(library, split, parts):
    run_case(library, Case(70, 90, 50, batch=(2, 3), pad=5, split=split, parts=parts))
    run_case(library, Case(33, 17, 400, np.float64, batch=(4,), ta=True, split=split, parts=parts))


@pytest.mark.parametrize("case", [
    Case(300, 2100, 1100, pad=1, split=1, parts=2, addend="in place", d_scale=1.0),
    Case(150, 1100, 500, np.float64, tb=True, split=1, parts=3, row_scale=1.0),
    Case(90, 700, 1700, ta=True, batch=(3,), split=1, parts=2, addend="separate", d_scale=0.5),
    Case(2, 5, 30, split=1, parts=3),  # a thread without rows
    Case(7, 130, 820, np.float64, split=1, parts=4, alpha=-2.0),
])
def test_rows_split_over_threads(library, case):
    """Split by rows, over several blocks of the sum and of the columns: each thread
    writes its rows alone, whatever the block boundaries."""
    for seed in range(3):
        run_case(library, case, seed)


@pytest.mark.parametrize("case", [
    Case(16, 27, 4096, ta=True, split=3, parts=2, row_scale=1.0, activation="relu"),
    Case(32, 144, 1000, tb=True, pad=3, split=3, parts=3, addend="in place", d_scale=1.0),
    Case(64, 48, 1024, np.float64, split=3, parts=2, addend="separate", d_scale=-0.5,
         alpha=2.0, keep_product=True, activation="gelu_tanh"),
    Case(20, 9, 777, ta=True, tb=True, pad=1, split=3, parts=4, alpha=-1.5),
    Case(5, 40, 3, split=3, parts=4),  # a block of the sum left empty
    Case(24, 33, 600, BF16, split=3, parts=2, row_scale=0.5),
    Case(24, 33, 600, BF16, cast="b", split=3, parts=2),
])
def test_sum_split_over_threads(library, case):
    """Split over k: each thread's block of the sum into partial sums of its own, added
    in order; the epilogue (addend in place or separate, row, activation, the plain
    product kept beside it) applied once, on the whole sum."""
    for seed in range(2):
        run_case(library, case, seed)


@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 10, 15, 16, 17])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_narrow_products(library, n, dtype):
    """At most one vector of columns (16 float32 with AVX-512, 8 float64) takes the narrow
    tile (12 rows): its edges, several blocks of the sum, every split, each epilogue."""
    for m in (1, 11, 12, 13, 250):
        run_case(library, Case(m, n, 1100, dtype, ta=m % 2 == 1, tb=n % 2 == 0, pad=1,
                               alpha=-0.5, addend="in place", d_scale=1.0, row_scale=-1.0))
    for split, parts in [(0, 2), (1, 2), (1, 3), (2, 2), (2, 3)]:
        run_case(library, Case(100, n, 300, dtype, tb=True, batch=(3,), split=split,
                               parts=parts, addend="separate", d_scale=0.5, row_scale=2.0))
    run_case(library, Case(1600, n, 20, dtype, pad=2))  # more rows than one block of A


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_read_in_place(library, dtype):
    """At most 512 columns, 1024 from 512 rows with AVX-512 (256 on Intel), where the
    library reads a row-major A in place instead of packing it (wider than a block of B's
    columns, NC: 128 float32, 64 float64): more rows than one block of A, several blocks
    of the sum, the edges of the tile, of the block and of the choice, each split."""
    for n in (63, 64, 65, 127, 128, 129, 256, 257, 512, 513, 1024, 1025):
        run_case(library, Case(1601, n, 1100, dtype, pad=2, alpha=-0.5, addend="separate",
                               d_scale=0.5, row_scale=1.0, activation="relu"))
        run_case(library, Case(1601, n, 1100, dtype, ta=True, tb=True, pad=1))
    for split, parts in [(1, 2), (2, 2), (0, 2)]:
        run_case(library, Case(61, 250, 420, dtype, batch=(2,), split=split, parts=parts,
                               addend="in place", d_scale=1.0))


@pytest.mark.parametrize("n", [18, 27, 32, 40, 48, 80, 95])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edge_panels_of_a_transposed_b(library, n, dtype):
    """A panel of B narrower than the tile, stored transposed (a convolution's weight
    gradient, 16 x 27 over a long sum): packed in 16 x 16 blocks, the rest element by
    element, and zeros past the end; its whole vectors stored from registers, the rest
    element by element; over several blocks of the sum, with each epilogue."""
    for m, k in [(16, 4096), (5, 33), (13, 1100)]:
        run_case(library, Case(m, n, k, dtype, tb=True, pad=1, alpha=-0.5,
                               addend="separate", d_scale=0.5, row_scale=1.0,
                               activation="relu"))
        run_case(library, Case(m, n, k, dtype, ta=True, tb=True, split=2, parts=2,
                               addend="in place", d_scale=1.0))


@pytest.mark.parametrize("addend, d_scale, row_scale, alpha", [
    ("none", 0.0, 0.0, -0.5),         # a scaled product
    ("separate", 1.0, 0.0, 1.0),      # a residual
    ("in place", 1.0, 0.0, -0.01),    # an SGD update of the addend itself
    ("in place", 2.0, 0.0, -6.0),
    ("none", 0.0, 1.0, 1.0),          # a bias
    ("separate", 0.5, -3.0, 2.0),     # both
    ("in place", -1.0, 1.0, 0.5),
])
@pytest.mark.parametrize("k", [1, 100, 1100])  # one block of the sum, or two
@pytest.mark.parametrize("split", [1, 2])
def test_affine_epilogues(library, addend, d_scale, row_scale, alpha, k, split):
    for dtype in (np.float32, np.float64):
        run_case(library, Case(77, 130, k, dtype, tb=True, pad=2, split=split, parts=2,
                               alpha=alpha, addend=addend, d_scale=d_scale,
                               row_scale=row_scale))


@pytest.mark.parametrize("activation", ["relu", "gelu_tanh", "gelu_erfc"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_activations_after_the_epilogue(library, activation, dtype):
    """The activation on the whole sum and its addends: one block of the sum or several
    (applied after the last), partial tiles, the narrow tile, splits, batches."""
    for m, n, k in [(77, 130, 100), (29, 45, 1700), (250, 10, 1100), (6, 64, 8), (1, 1, 1)]:
        run_case(library, Case(m, n, k, dtype, tb=True, pad=1, alpha=-0.5, addend="in place",
                               d_scale=1.0, row_scale=2.0, activation=activation))
    for split, parts in [(0, 2), (1, 2), (2, 3)]:
        run_case(library, Case(70, 90, 51, dtype, batch=(2, 3), split=split, parts=parts,
                               row_scale=1.0, activation=activation))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
@pytest.mark.parametrize("out", [None, "same"])
def test_product_kept_beside_the_result(library, dtype, out):
    """With E: C the plain product, E the epilogue's result (a training step keeps both):
    several blocks of the sum, the narrow tile, splits, batches; 16-bit results too."""
    out = dtype if out == "same" and dtype == BF16 else None
    for m, n, k in [(77, 130, 100), (29, 45, 1700), (250, 10, 1100), (1, 1, 1)]:
        run_case(library, Case(m, n, k, dtype, tb=True, pad=1, alpha=-0.5, addend="separate",
                               d_scale=1.0, row_scale=2.0, activation="gelu_tanh", out=out,
                               keep_product=True))
    for split, parts in [(0, 2), (1, 2), (2, 3)]:
        run_case(library, Case(70, 90, 51, dtype, batch=(2, 3), split=split, parts=parts,
                               row_scale=1.0, activation="relu", out=out, keep_product=True))


def test_epilogue_without_a_product(library):
    """k = 0 (the plan never asks for it, but the contract allows it): the addends alone."""
    run_case(library, Case(20, 40, 0, addend="separate", d_scale=2.0, row_scale=1.0))


@pytest.mark.parametrize("k", [1100, 2100])  # 2 or 3 blocks of the sum (float64: 3 or 5)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_over_several_blocks(library, k, dtype):
    run_case(library, Case(29, 45, k, dtype, ta=True, pad=1, addend="in place", d_scale=1.0,
                           alpha=-0.1))


def test_more_rows_than_one_block_of_a(library):
    run_case(library, Case(1600, 40, 20, ta=True, pad=1, alpha=3.0, row_scale=1.0))


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(
    m=st.integers(1, 600), n=st.integers(1, 600), k=st.integers(1, 600),
    dtype=st.sampled_from([np.float32, np.float64, BF16, F16]), ta=st.booleans(),
    tb=st.booleans(),
    batch=st.sampled_from([(), (1,), (3,), (2, 2)]), pad=st.integers(0, 4),
    split_parts=st.sampled_from([(0, 1), (0, 2), (1, 2), (2, 2), (1, 3)]),
    epilogue=st.sampled_from([("none", 0.0, 0.0), ("separate", 0.5, 0.0),
                              ("in place", 1.0, 2.0), ("none", 0.0, -1.0)]),
    alpha=st.sampled_from([1.0, -1.5]), activation=st.sampled_from(sorted(ACTIVATIONS)),
    seed=st.integers(0, 2**16))
def test_random_products(library, m, n, k, dtype, ta, tb, batch, pad, split_parts, epilogue,
                         alpha, activation, seed):
    split, parts = split_parts
    addend, d_scale, row_scale = epilogue
    # Small products only when batched, to keep the example's time in check.
    if batch and m * n * k > 2_000_000:
        m, n = max(1, m // 4), max(1, n // 4)
    run_case(library, Case(m, n, k, dtype, ta, tb, batch, pad, split, parts, alpha, addend,
                           d_scale, row_scale, activation), seed)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 ISA flags")
@pytest.mark.parametrize("cflags", ["-mno-avx512f", "-mno-avx512f -mno-avx2 -mno-fma"])
def test_narrower_vector_isas(cflags):
    """The AVX2/FMA build (32-byte vectors) and the portable one (16 bytes, no FMA), as
    the compiler builds them for a CPU without AVX-512 (or AVX2)."""
    with config.override(cflags=cflags):
        narrow = toolchain.load_library(ember_gemm.library_path())
    for size in (1, 5, 6, 7, 15, 16, 17, 33, 130, 401):
        for dtype in (np.float32, np.float64, BF16, F16):
            run_case(narrow, Case(size, size + 3, size + 1, dtype, ta=size % 2 == 1, pad=1))
        run_case(narrow, Case(size, size + 3, size + 1, BF16, tb=True, cast="ab"))
    run_case(narrow, Case(70, 90, 1100, batch=(2,), tb=True, split=2, parts=2, alpha=2.0,
                          addend="in place", d_scale=1.0, row_scale=-1.0))


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_16_bit_operands(library, dtype):
    """bfloat16 and float16 operands, float32 sums and results: the tiles' and the pairs'
    edges (odd sums), transposes, several blocks of the sum, splits and epilogues."""
    for size in (1, 2, 5, 6, 7, 17, 63, 65, 129, 401):
        run_case(library, Case(size, size, size, dtype))
        run_case(library, Case(size, 7, 3, dtype, tb=True))
        run_case(library, Case(3, size + 64, 7, dtype, ta=True, pad=1))
    for ta in (False, True):
        for tb in (False, True):
            run_case(library, Case(45, 130, 1101, dtype, ta=ta, tb=tb, pad=3, alpha=-0.5,
                                   addend="in place", d_scale=1.0, row_scale=2.0))
    for split, parts in [(0, 2), (1, 2), (1, 3), (2, 2)]:
        run_case(library, Case(70, 90, 51, dtype, batch=(2, 3), pad=5, split=split,
                               parts=parts, addend="separate", d_scale=0.5))
        run_case(library, Case(100, 10, 300, dtype, tb=True, split=split, parts=parts))


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_16_bit_results(library, dtype):
    """16-bit operands and results: summed in float32, every addend and the activation
    applied before the one rounding; edges, several blocks of the sum, splits, batches."""
    for size in (1, 6, 7, 17, 65, 129):
        run_case(library, Case(size, size + 1, size + 2, dtype, out=dtype, ta=size % 2 == 1))
    run_case(library, Case(45, 130, 1101, dtype, out=dtype, tb=True, pad=3, alpha=-0.5,
                           addend="in place", d_scale=1.0, row_scale=2.0, activation="relu"))
    run_case(library, Case(250, 10, 300, dtype, out=dtype, pad=1, addend="separate",
                           d_scale=0.5, activation="gelu_tanh"))  # (the narrow tile)
    for split, parts in [(0, 2), (1, 3), (2, 2)]:
        run_case(library, Case(70, 90, 51, dtype, out=dtype, batch=(2, 3), pad=5, split=split,
                               parts=parts, row_scale=1.0))


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_16_bit_results_round_to_nearest_even(library, dtype):
    """Integer operands whose float32 sums are exact, chosen so that most results fall
    between two 16-bit values, many of them half-way: the one rounding is ml_dtypes'
    (NumPy's for float16), to the nearest, ties to even, bit for bit."""
    rng = np.random.default_rng(1)
    m, n, k = 40, 70, 300
    bound = 16 if dtype == BF16 else 40  # (float16 sums: std 9500, below its 65504)
    a = rng.integers(-bound, bound + 1, (m, k)).astype(np.float64)
    b = rng.integers(-bound, bound + 1, (k, n)).astype(np.float64)
    expected = a @ b  # |sums| < 2^24: exact in float32; bfloat16 keeps 8 bits, float16 11
    a16, b16 = a.astype(dtype), b.astype(dtype)  # (exact: small integers)
    name = "bf16" if dtype == BF16 else "f16"
    c = _product(library, f"ember_own_gemm_{name}_{name}", a16, b16, dtype)
    rounded = np.mean(expected.astype(dtype).astype(np.float64) != expected)
    assert rounded > 0.5, "the case must exercise rounding"
    np.testing.assert_array_equal(c.view(np.uint16), expected.astype(dtype).view(np.uint16))


def test_bfloat16_multiplies_pairs_where_the_cpu_can(library):
    """With AVX512_BF16 the wide bfloat16 tile is the vdpbf16ps one (tested above)."""
    pairs = ctypes.c_int.in_dll(library, "ember_own_gemm_bf16_pairs").value
    assert pairs == ("avx512_bf16" in cpu_flags() and platform.machine() == "x86_64")


@pytest.mark.skipif("avx512_bf16" not in cpu_flags(), reason="no AVX512_BF16 to turn off")
def test_bfloat16_without_the_pair_instruction():
    """The build for a CPU without AVX512_BF16: bfloat16 converted while packing."""
    with config.override(cflags="-mno-avx512bf16"):
        converted = toolchain.load_library(ember_gemm.library_path())
    assert ctypes.c_int.in_dll(converted, "ember_own_gemm_bf16_pairs").value == 0
    for size in (1, 7, 65, 130, 401):
        run_case(converted, Case(size, size + 3, size + 1, BF16, ta=size % 2 == 1, pad=1))
        run_case(converted, Case(size, size + 3, size + 1, BF16, tb=size % 2 == 1, pad=1,
                                 cast=("a", "b", "ab")[size % 3]))
    run_case(converted, Case(70, 90, 1100, BF16, batch=(2,), tb=True, split=2, parts=2,
                             addend="in place", d_scale=1.0, row_scale=-1.0))


def _amx_granted_by_the_os() -> bool:
    """Whether the OS lets this process use AMX's tile data (asked as the library asks:
    the answer is the process's, whoever asks)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    arch_prctl, req_xcomp_perm, xtiledata = 158, 0x1023, 18
    return libc.syscall(ctypes.c_long(arch_prctl), ctypes.c_long(req_xcomp_perm),
                        ctypes.c_long(xtiledata)) == 0


def _has_amx() -> bool:
    return (platform.machine() == "x86_64"
            and {"amx_tile", "amx_bf16", "avx512_bf16"} <= cpu_flags())


def test_bfloat16_on_amx_tiles_where_the_cpu_can(library):
    """Where the CPU has AMX-BF16 the wide bfloat16 tile is AMX's (tested above and
    below), and runs on it where the OS grants the tile data, else on vdpbf16ps."""
    amx = ctypes.c_int.in_dll(library, "ember_own_gemm_bf16_amx").value
    assert amx == _has_amx()
    granted = library.ember_own_gemm_bf16_amx_granted()
    assert granted == (amx and _amx_granted_by_the_os())


@pytest.mark.parametrize("m", [1, 15, 16, 17, 31, 32, 33, 65])
def test_bfloat16_tile_edges(library, m):
    """The edges of AMX's tile (16 x 16 sums in 2 x 2 blocks: 32 rows, 32 columns; 32
    elements of the sum per step, 1024 per block; 256 columns per block of B), with
    transposes, casts, epilogues and 16-bit results (the vdpbf16ps tile where there is
    no AMX: a build without it is tested below)."""
    for n in (17, 31, 32, 33, 64, 257):
        for k in (1, 2, 31, 32, 33, 100):
            run_case(library, Case(m, n, k, BF16, ta=k % 2 == 1, tb=n % 2 == 1, pad=1))
    for n, k in [(33, 1025), (300, 2100)]:
        run_case(library, Case(m, n, k, BF16, tb=True, pad=2, alpha=-0.5, addend="in place",
                               d_scale=1.0, row_scale=2.0, activation="gelu_tanh"))
        run_case(library, Case(m, n, k, BF16, out=BF16, ta=True, addend="separate",
                               d_scale=0.5, cast="ab"[m % 2], keep_product=m % 3 == 0))
        run_case(library, Case(m, n, k, BF16, cast="ab", row_scale=1.0, activation="relu"))
    run_case(library, Case(m, 70, 97, BF16, batch=(2, 3), pad=5, split=m % 3, parts=2,
                           out=BF16 if m % 2 else None))


@pytest.mark.skipif(not _has_amx(), reason="no AMX to turn off")
def test_bfloat16_without_amx():
    """The build for a CPU with AVX512_BF16 but no AMX: the vdpbf16ps tile."""
    with config.override(cflags="-mno-amx-tile -mno-amx-bf16"):
        pairs = toolchain.load_library(ember_gemm.library_path())
    assert ctypes.c_int.in_dll(pairs, "ember_own_gemm_bf16_amx").value == 0
    assert pairs.ember_own_gemm_bf16_amx_granted() == 0
    assert ctypes.c_int.in_dll(pairs, "ember_own_gemm_bf16_pairs").value == 1
    for size in (1, 7, 33, 65, 130, 401):
        run_case(pairs, Case(size, size + 3, size + 1, BF16, ta=size % 2 == 1, pad=1))
        run_case(pairs, Case(size, size + 3, size + 1, BF16, tb=size % 2 == 1, pad=1,
                             cast=("a", "b", "ab")[size % 3], out=BF16 if size % 2 else None))
    run_case(pairs, Case(70, 90, 1100, BF16, batch=(2,), tb=True, split=2, parts=2,
                         addend="in place", d_scale=1.0, row_scale=-1.0, activation="relu"))


def _product(library: ctypes.CDLL, name: str, a: np.ndarray, b: np.ndarray, result,
             split: int = 1, parts: int = 2, alpha: float = 1.0, row: np.ndarray | None = None,
             activation: str = "none") -> np.ndarray:
    """``name``'s C = activation(alpha a @ b + row) for contiguous matrices a and b."""
    (m, k), n = a.shape, b.shape[1]
    c = np.zeros((m, n), result)
    function = getattr(library, name)
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    function.argtypes = [ctypes.c_int, ctypes.c_int, i64, pointer, ctypes.c_int, ctypes.c_int,
                         i64, i64, i64, pointer, i64, i64, pointer, i64, i64, pointer, i64,
                         ctypes.c_float, pointer, ctypes.c_float, pointer, ctypes.c_float,
                         ctypes.c_int, pointer]
    function.restype = None
    batch = _Batch(0, None, None, None, None)
    function(split, parts, 1, ctypes.byref(batch), _NO_TRANS, _NO_TRANS, m, n, k,
             a.ctypes.data, k, k, b.ctypes.data, n, 1, c.ctypes.data, n, alpha, None, 0.0,
             None if row is None else row.ctypes.data, 1.0, ACTIVATIONS[activation], None)
    return c


@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("cast", ["a", "b", "ab"])
def test_float32_operands_cast_as_packed(library, dtype, cast):
    """A float32 operand of a 16-bit product (``x.astype(bfloat16) @ w``) rounded as it
    is packed: against the oracle on the tiles' edges, transposes, splits and epilogues,
    and bit for bit against the product of the operands cast first (ml_dtypes' rounding,
    to nearest, ties to even, as the cast kernel stores it), wide and narrow tiles,
    16-bit and float32 results."""
    for size in (1, 6, 7, 17, 65, 129, 401):
        run_case(library, Case(size, size + 1, size + 2, dtype, ta=size % 2 == 1,
                               tb=size % 3 == 0, pad=1, cast=cast))
    run_case(library, Case(45, 130, 1101, dtype, tb=True, pad=3, alpha=-0.5, addend="in place",
                           d_scale=1.0, row_scale=2.0, activation="relu", cast=cast))
    run_case(library, Case(250, 10, 300, dtype, out=dtype, ta=True, pad=1, addend="separate",
                           d_scale=0.5, activation="gelu_tanh", cast=cast))
    for split, parts in [(0, 2), (1, 3), (2, 2)]:
        run_case(library, Case(70, 90, 51, dtype, batch=(2, 3), pad=5, split=split,
                               parts=parts, row_scale=1.0, cast=cast))
    rng = np.random.default_rng(2)
    name = "bf16" if dtype == BF16 else "f16"
    for m, n, k in [(97, 200, 333), (250, 10, 1025)]:
        a, b = rng.standard_normal((m, k), F32), rng.standard_normal((k, n), F32)
        row = rng.standard_normal(n).astype(dtype)
        stored = (a if "a" in cast else a.astype(dtype), b if "b" in cast else b.astype(dtype))
        for result in (F32, dtype):
            plain = f"ember_own_gemm_{name}" + (f"_{name}" if result == dtype else "")
            args = {"alpha": -0.5, "row": row.astype(result), "activation": "gelu_tanh"}
            cast_first = _product(library, plain, a.astype(dtype), b.astype(dtype), result,
                                  **args)
            fused = _product(library, f"{plain}_cast_{cast}", *stored, result, **args)
            np.testing.assert_array_equal(fused.view(np.uint8), cast_first.view(np.uint8))
