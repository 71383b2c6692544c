"""``lax.clz``, ``lax.mulhi``, ``lax.approx_max_k`` / ``approx_min_k``,
``lax.broadcast_shapes`` and ``lax.scatter_sub``: against NumPy (Python integers for the
bit arithmetic), and JAX where installed."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import lax

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]


def _edge_and_random(dtype, n=200, seed=0):
    info = np.iinfo(dtype)
    edges = np.array([0, 1, 2, 3, info.max, info.min, info.max - 1, info.min + 1], dtype)
    rest = np.random.default_rng(seed).integers(info.min, info.max, n, dtype=dtype,
                                                endpoint=True)
    return np.concatenate([edges, rest])


@pytest.mark.parametrize("dtype", INTS)
def test_clz_counts_leading_zero_bits(dtype):
    x = _edge_and_random(dtype)
    bits = np.dtype(dtype).itemsize * 8
    want = [bits - (int(v) % (1 << bits)).bit_length() for v in x]
    for run in (lax.clz, ember.jit(lax.clz)):
        np.testing.assert_array_equal(np.asarray(run(x)), want)


@pytest.mark.parametrize("dtype", INTS)
def test_mulhi_is_the_high_half_of_the_exact_product(dtype):
    x, y = _edge_and_random(dtype, seed=1), _edge_and_random(dtype, seed=2)[::-1].copy()
    bits = np.dtype(dtype).itemsize * 8
    want = np.array([(int(a) * int(b)) >> bits for a, b in zip(x, y)]).astype(dtype)
    for run in (lax.mulhi, ember.jit(lax.mulhi)):
        np.testing.assert_array_equal(np.asarray(run(x, y)), want)
    with pytest.raises(TypeError, match="integers"):
        lax.mulhi(np.ones(2, np.float32), np.ones(2, np.float32))


def test_approx_k_is_exact():
    x = np.random.default_rng(3).standard_normal((3, 50)).astype(np.float32)
    values, indices = lax.approx_max_k(x, 5)
    np.testing.assert_array_equal(np.asarray(values), -np.sort(-x, axis=1)[:, :5])
    np.testing.assert_array_equal(np.asarray(indices), np.argsort(-x, axis=1)[:, :5])
    values, indices = lax.approx_min_k(x, 2, reduction_dimension=0)
    np.testing.assert_array_equal(np.asarray(values), np.sort(x, axis=0)[:2])
    np.testing.assert_array_equal(np.asarray(indices), np.argsort(x, axis=0)[:2])
    x[1, 7] = np.nan  # NaN above every number for max, after every number for min
    assert np.isnan(np.asarray(lax.approx_max_k(x, 1)[0])[1, 0])
    assert not np.isnan(np.asarray(lax.approx_min_k(x, 5)[0])).any()
    with pytest.raises(ValueError, match="k must be at most"):
        lax.approx_max_k(x, 51)


def test_broadcast_shapes_and_scatter_sub():
    assert lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert lax.broadcast_shapes((1,), (2, 1), ()) == (2, 1)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        lax.broadcast_shapes((2,), (3,))
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    operand = np.arange(5.0, dtype=np.float32)
    indices, updates = np.array([[1], [3], [1]]), np.array([1.0, 2.0, 3.0], np.float32)
    want = operand.copy()
    np.subtract.at(want, indices[:, 0], updates)
    np.testing.assert_array_equal(np.asarray(lax.scatter_sub(operand, indices, updates, dnums)),
                                  want)
    grad = ember.grad(lambda u: lax.scatter_sub(operand, indices, u, dnums).sum())(updates)
    np.testing.assert_array_equal(np.asarray(grad), -np.ones(3))


def test_as_jax():
    jax = pytest.importorskip("jax")
    for dtype in INTS:
        x, y = _edge_and_random(dtype, seed=4), _edge_and_random(dtype, seed=5)
        np.testing.assert_array_equal(np.asarray(lax.clz(x)), np.asarray(jax.lax.clz(x)))
        np.testing.assert_array_equal(np.asarray(lax.mulhi(x, y)),
                                      np.asarray(jax.lax.mulhi(x, y)))
    # (no NaN here: on CPU JAX's approx_min_k can place a NaN among the k smallest)
    x = np.random.default_rng(6).standard_normal((4, 30)).astype(np.float32)
    for name in ("approx_max_k", "approx_min_k"):
        for k, axis in ((5, -1), (3, 0)):
            ours = getattr(lax, name)(x, k, reduction_dimension=axis)
            theirs = getattr(jax.lax, name)(x, k, reduction_dimension=axis)
            for a, b in zip(ours, theirs):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert lax.broadcast_shapes((2, 1), (1, 3)) == jax.lax.broadcast_shapes((2, 1), (1, 3))
