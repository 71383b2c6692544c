"""sort and top_k compiled to C on the CPU backend (a merge sort per row, no host call):
bit-exact against the reference backend over dtypes (half precision too), NaNs, signed zeros, ties (the sort
is stable), several operands and keys, every axis, empty and length-1 axes."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_testing import compiled, requires_cpu

import ember
from ember import lax

pytestmark = requires_cpu

DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "bool"]


def values(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    """Few distinct values (many ties); floats also NaN, -0.0 and 0.0."""
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "int32":
        return rng.integers(-4, 4, shape).astype(np.int32)
    pool = np.array([np.nan, -0.0, 0.0, 1.5, -2.0, np.inf, -np.inf, 3.0, 1e-3, 1.00390625],
                    ember.numpy.dtype(dtype))  # (bfloat16 rounds 1e-3, 1+2^-8 stays apart)
    return pool[rng.integers(0, len(pool), shape)]


def assert_bit_exact(fun, *args) -> None:
    got = ember.jit(fun, backend="cpu")(*args)
    want = ember.jit(fun, backend="reference")(*args)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes(), (g, w)
    kinds = [k.kind for k in compiled(fun, *args).kernels]
    assert "host" not in kinds, kinds


def run_case(dtype: str, fun, *shapes, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with ember.config.override(enable_x64=dtype == "float64"):
        assert_bit_exact(fun, *[values(rng, s, dtype) for s in shapes])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dimension", [0, 1, 2])
def test_sort_of_one_operand_along_every_axis(dtype, dimension):
    run_case(dtype, lambda x: (lax.sort(x, dimension=dimension),), (5, 6, 7))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_keys", [1, 2])
def test_several_operands_follow_the_keys_stably(dtype, num_keys):
    def fun(a, b, c):
        positions = lax.broadcasted_iota(np.int32, a.shape, 1)
        return lax.sort((a, b, c, positions), dimension=1, num_keys=num_keys)
    run_case(dtype, fun, (4, 33, 3), (4, 33, 3), (4, 33, 3))


@pytest.mark.parametrize("shape, dimension", [((0, 4), 0), ((3, 0), 1), ((1, 5), 0),
                                              ((5, 1), 1), ((1,), 0), ((3, 1, 2), 1)])
def test_empty_and_length_one_axes(shape, dimension):
    run_case("float32", lambda x: (lax.sort(x, dimension=dimension),), shape)


def test_argsort_reads_only_the_indices():
    run_case("float32", lambda x: (lax.sort((x, lax.broadcasted_iota(np.int32, x.shape, 0)),
                                            dimension=0)[1],), (70, 3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0, 1, 3, 9])
def test_top_k_breaks_ties_by_index_and_puts_nans_first(dtype, k):
    run_case(dtype, lambda x: lax.top_k(x, k), (2, 3, 9))


@pytest.mark.parametrize("k", [5, 100])  # (kept in order while scanning; a whole sort)
def test_top_k_of_a_long_row_and_what_consumes_it(k):
    run_case("float32", lambda x: tuple(v * 2 for v in lax.top_k(x + 1.0, k)), (3, 1000),
             seed=1)


def test_sort_of_long_rows_with_ties():
    run_case("int32", lambda x, y: lax.sort((x, y), dimension=0), (1000, 3), (1000, 3))


def test_the_sort_is_a_call_of_the_module():
    x = np.ones((4, 8), np.float32)
    (info,) = compiled(lambda a: lax.sort(a, dimension=1), x).kernels
    assert info.kind == "library" and info.ops == ["sort"]
    assert "sort" in info.why_boundary and "static void sort_" in info.source
