"""sort and top_k against NumPy, their errors, and jit against eager."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
from ember import lax
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.test_util import check_grads, check_vmap

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5)
# Few distinct values so that ties (and NaNs) are common.
values = st.sampled_from([np.nan, -1.0, 0.0, 2.0, 2.5])


@given(shapes, st.data())
def test_sort_single_operand_matches_numpy(shape, data):
    x = data.draw(hnp.arrays(np.float32, shape, elements=values))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    np.testing.assert_array_equal(lax.sort(x, dimension=axis), np.sort(x, axis=axis))


@given(shapes, st.data())
def test_sort_by_two_keys_carries_payload_stably(shape, data):
    primary = data.draw(hnp.arrays(np.float32, shape, elements=values))
    secondary = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(0, 2)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    payload = np.arange(primary.size, dtype=np.int32).reshape(shape)
    order = np.lexsort((secondary, primary), axis=axis)  # last key is the primary one
    got = lax.sort((primary, secondary, payload), dimension=axis, num_keys=2)
    for result, operand in zip(got, (primary, secondary, payload)):
        np.testing.assert_array_equal(result, np.take_along_axis(operand, order, axis))


def test_sort_orders_complex_like_numpy():
    x = np.array([1 + 2j, 1 + 1j, np.nan, -3 + 5j], np.complex64)
    np.testing.assert_array_equal(lax.sort(x), np.sort(x))


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), st.data())
def test_top_k_largest_first_lowest_index_on_ties(shape, data):
    x = data.draw(hnp.arrays(np.float32, shape, elements=values))
    k = data.draw(st.integers(0, shape[-1]))
    # NaN counts as the largest; stable argsort of the negation keeps ties in index order.
    key = np.where(np.isnan(x), -np.inf, -x)
    expected_indices = np.argsort(key, axis=-1, kind="stable")[..., :k]
    got_values, got_indices = lax.top_k(x, k)
    np.testing.assert_array_equal(got_indices, expected_indices.astype(np.int32))
    np.testing.assert_array_equal(got_values, np.take_along_axis(x, expected_indices, -1))


@pytest.mark.parametrize("call, error, message", [
    (lambda x: lax.sort((x, x[:1])), EmberValueError, r"one shape.*\(2, 3\), \(1, 3\)"),
    (lambda x: lax.sort(x, dimension=2), EmberIndexError, "axis 2 .* rank 2"),
    (lambda x: lax.sort((x, x), num_keys=3), EmberValueError, "num_keys=3"),
    (lambda x: lax.top_k(x, 4), EmberValueError, r"k=4 .* \(2, 3\)"),
    (lambda x: lax.top_k(x[0, 0], 1), EmberValueError, "rank >= 1"),
    (lambda x: lax.top_k(x.astype(np.complex64), 1), EmberTypeError, "complex"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(np.zeros((2, 3), np.float32))


def test_jit_matches_eager():
    x = np.array([[3, 1, 2, 2], [0, 5, 5, 4]], np.float32)

    def f(x):
        return (*lax.sort((x, lax.neg(x)), dimension=0), *lax.top_k(x, 3))

    with ember.config.override(backend="reference"):
        for got, want in zip(ember.jit(f)(x), f(x)):
            np.testing.assert_array_equal(got, want)


# --- transformation rules -------------------------------------------------------------

X = np.random.default_rng(0).permutation(12).reshape(3, 4) + 0.5  # distinct: no ties


def test_sort_gradients(x64):
    check_grads(lambda x: lax.sort(x, dimension=0), (X,), order=2)
    check_grads(lambda x, y: lax.sort((x, y), dimension=1), (X, np.sin(X)), order=2)


def test_sort_gradient_follows_the_integer_key(x64):
    keys = np.array([[2, 0, 1, 0]], np.int32)
    _, tangent = ember.jvp(lambda v: lax.sort((keys, v), num_keys=1)[1], (X[:1],),
                           (np.arange(4.0)[None],))
    np.testing.assert_array_equal(tangent, [[1.0, 3.0, 2.0, 0.0]])


def test_top_k_gradients(x64):
    check_grads(lambda x: lax.top_k(x, 2)[0], (X,), order=2)


@pytest.mark.parametrize("in_axes", [(0, None), (1, 1), (2, 0)])
def test_sort_vmap(in_axes):
    x = np.array(np.random.default_rng(1).integers(0, 3, (2, 3, 4)), np.float32)
    payload = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    payload = payload[0] if in_axes[1] is None else np.moveaxis(payload, *in_axes)
    check_vmap(lambda k, p: lax.sort((k, p), dimension=0, num_keys=1), (x, payload), in_axes)


@pytest.mark.parametrize("axis", [0, 2])
def test_top_k_vmap(axis):
    x = np.array(np.random.default_rng(2).integers(0, 4, (2, 3, 4)), np.float32)
    check_vmap(lambda v: lax.top_k(v, 2), (x,), axis)
