"""Searching, sorting and set functions against NumPy; static size= under jit."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberIndexError, EmberTypeError, EmberValueError

SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)
VALUES = st.integers(-3, 3)  # few distinct values: ties and repeats are common


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_array_equal(actual, expected)


def _floats(draw, shape, nans=False):
    x = draw(hnp.arrays(np.float32, shape, elements=VALUES.map(float)))
    if nans:
        mask = draw(hnp.arrays(np.bool_, shape))
        x = np.where(mask, np.nan, x).astype(np.float32)
    return x


@given(shape=SHAPES, data=st.data())
def test_argmax_argmin(shape, data):
    x = _floats(data.draw, shape, nans=data.draw(st.booleans()))
    for fn in ("argmax", "argmin", "nanargmax", "nanargmin"):
        if fn.startswith("nan") and np.isnan(x).all():
            continue
        for axis in [None, *range(-x.ndim, x.ndim)]:
            if fn.startswith("nan") and axis is not None and np.isnan(x).all(axis=axis).any():
                continue
            _same(getattr(enp, fn)(x, axis=axis), getattr(np, fn)(x, axis=axis))
            _same(getattr(enp, fn)(x, axis=axis, keepdims=True),
                  getattr(np, fn)(x, axis=axis, keepdims=True))
    assert enp.argmax(x).dtype == np.int32
    _same(enp.argmax(x > 0), np.argmax(x > 0))


@given(shape=SHAPES, data=st.data())
def test_nonzero_family(shape, data):
    x = _floats(data.draw, shape)
    for ours, theirs in zip(enp.nonzero(x), np.nonzero(x)):
        _same(ours, theirs)
    _same(enp.flatnonzero(x), np.flatnonzero(x))
    _same(enp.argwhere(x), np.argwhere(x))
    _same(enp.count_nonzero(x), np.count_nonzero(x))
    size = data.draw(st.integers(0, x.size + 2))
    count = np.count_nonzero(x)
    for ours, theirs in zip(enp.nonzero(x, size=size, fill_value=-1), np.nonzero(x)):
        expected = np.full(size, -1)
        expected[:min(size, count)] = theirs[:size]
        _same(ours, expected)
    _same(enp.extract(x > 0, x), np.extract(x > 0, x))
    for ours, theirs in zip(enp.where(x), np.where(x)):
        _same(ours, theirs)


def test_nonzero_with_size_under_jit():
    x = np.array([[0, 3], [4, 0], [0, 5]])
    with ember.config.override(backend="reference"):
        rows, cols = ember.jit(lambda x: enp.nonzero(x, size=4))(x)
        masked = ember.jit(lambda x: x[enp.nonzero(x > 3, size=1)])(x)
    _same(rows, [0, 1, 2, 0])
    _same(cols, [1, 0, 1, 0])
    _same(masked, [4])
    with pytest.raises(EmberValueError, match="nonzero of a 0-d array"):
        enp.nonzero(np.float32(1))


@given(data=st.data(), side=st.sampled_from(["left", "right"]))
def test_searchsorted_matches_numpy(data, side):
    a = np.sort(data.draw(hnp.arrays(np.float32, st.integers(0, 9), elements=VALUES.map(float))))
    if data.draw(st.booleans()):
        a = np.concatenate([a, [np.nan, np.nan]]).astype(np.float32)
    v = data.draw(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4),
                             elements=st.one_of(st.integers(-4, 4).map(float),
                                                st.just(np.nan))))
    _same(enp.searchsorted(a, v, side=side), np.searchsorted(a, v, side=side))
    unsorted = a[::-1].copy()
    sorter = np.argsort(unsorted, kind="stable")
    _same(enp.searchsorted(unsorted, v, side=side, sorter=sorter),
          np.searchsorted(unsorted, v, side=side, sorter=sorter))
    ints = np.array([1, 3, 3, 7])
    _same(enp.searchsorted(ints, 3, side=side), np.searchsorted(ints, 3, side=side))


@given(shape=SHAPES, data=st.data())
def test_sort_and_argsort_are_stable(shape, data):
    x = _floats(data.draw, shape, nans=data.draw(st.booleans()))
    for axis in [None, *range(-x.ndim, x.ndim)]:
        _same(enp.sort(x, axis=axis), np.sort(x, axis=axis))
        _same(enp.argsort(x, axis=axis), np.argsort(x, axis=axis, kind="stable"))
    if np.isnan(x).any():
        return  # descending order of NaNs is not specified
    for axis in range(-x.ndim, x.ndim):
        _same(enp.sort(x, axis=axis, descending=True), -np.sort(-x, axis=axis))
        order = np.asarray(enp.argsort(x, axis=axis, descending=True))
        _same(np.take_along_axis(x, order, axis), -np.sort(-x, axis=axis))


def test_descending_argsort_keeps_ties_in_order():
    x = np.array([1, 3, 1, 3, 2])
    _same(enp.argsort(x, descending=True), [1, 3, 4, 0, 2])
    _same(enp.argsort(x, stable=True), np.argsort(x, kind="stable"))


def test_lexsort_partition_sort_complex():
    a = np.array([1, 5, 1, 4, 3, 4, 4])
    b = np.array([9, 4, 0, 4, 0, 2, 1])
    _same(enp.lexsort((b, a)), np.lexsort((b, a)))
    part = np.asarray(enp.partition(a, 3))
    assert part[3] == np.sort(a)[3] and (part[:3] <= part[3]).all() and (part[4:] >= part[3]).all()
    _same(a[np.asarray(enp.argpartition(a, 2))][2], np.sort(a)[2])
    z = np.array([1 + 2j, 1 - 1j, 0 + 5j], np.complex64)
    _same(enp.sort_complex(z), np.sort_complex(z))
    with pytest.raises(EmberValueError, match="order= .structured arrays. is not supported"):
        enp.sort(a, order="x")
    with pytest.raises(EmberTypeError, match="lexsort takes a sequence of key arrays, got int"):
        enp.lexsort(3)


@given(shape=SHAPES, data=st.data())
def test_unique_matches_numpy(shape, data):
    x = _floats(data.draw, shape, nans=data.draw(st.booleans()))
    values, index, inverse, counts = enp.unique(x, return_index=True, return_inverse=True,
                                                return_counts=True)
    e_values, e_index, e_inverse, e_counts = np.unique(x, return_index=True,
                                                       return_inverse=True, return_counts=True)
    _same(values, e_values)
    _same(index, e_index)
    _same(counts, e_counts)
    _same(np.asarray(inverse).reshape(-1), e_inverse.reshape(-1))
    result = enp.unique_all(x)
    expected = np.unique_all(x)
    _same(result.values, expected.values)
    _same(result.counts, expected.counts)
    _same(result.inverse_indices, expected.inverse_indices)
    _same(result.indices, expected.indices)
    _same(enp.unique_values(x), np.unique_values(x))
    _same(enp.unique_counts(x).counts, np.unique_counts(x).counts)
    _same(enp.unique_inverse(x).inverse_indices, np.unique_inverse(x).inverse_indices)


def test_unique_with_size_under_jit():
    x = np.array([3, 1, 3, 2, 1, 3])
    with ember.config.override(backend="reference"):
        values, counts = ember.jit(lambda x: enp.unique(x, return_counts=True, size=5,
                                                         fill_value=-1))(x)
    _same(values, [1, 2, 3, -1, -1])
    _same(counts, [2, 1, 3, 0, 0])
    _same(enp.unique(x, size=2), [1, 2])
    with pytest.raises(ConcretizationError, match="unique without size="):
        ember.jit(enp.unique)(x)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), data=st.data())
def test_unique_along_an_axis_matches_numpy(shape, data):
    x = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(0, 1)))  # repeated slices
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    out = enp.unique(x, True, True, True, axis=axis)
    expected = np.unique(x, True, True, True, axis=axis)
    for actual, wanted in zip(out, expected):
        _same(actual, wanted)


def test_unique_along_an_axis_with_size_matches_jax():
    x = np.array([[1, 2], [3, 4], [1, 2], [0, 5]], np.int32)
    with ember.config.override(backend="reference"):
        out = ember.jit(lambda v: enp.unique(v, True, True, True, axis=0, size=5))(x)
        filled = ember.jit(lambda v: enp.unique(v, axis=1, size=3, fill_value=-1))(x)
    expected = ([[0, 5], [1, 2], [3, 4], [0, 5], [0, 5]], [3, 0, 1, 3, 3], [1, 2, 1, 0],
                [1, 2, 1, 0, 0])  # JAX's padding: the first value and index, zero counts
    for actual, wanted in zip(out, expected):
        _same(actual, wanted)
    _same(filled, [[1, 2, -1], [3, 4, -1], [1, 2, -1], [0, 5, -1]])
    _same(enp.unique(x, axis=0, size=2, return_counts=True)[1], [1, 2])  # cut, counts exact
    nan_rows = np.array([[np.nan, 1], [np.nan, 1], [0, 1]], np.float32)
    _same(enp.unique(nan_rows, axis=0), [[0, 1], [np.nan, 1]])  # NaN rows merge, as JAX
    assert enp.unique(nan_rows, axis=0, equal_nan=False).shape == (3, 2)
    jnp = pytest.importorskip("jax.numpy")
    for actual, wanted in zip(out, jnp.unique(x, True, True, True, axis=0, size=5)):
        _same(actual, wanted)
    _same(filled, jnp.unique(x, axis=1, size=3, fill_value=-1))
    _same(enp.unique(nan_rows, axis=0), jnp.unique(nan_rows, axis=0))


def test_unique_axis_errors():
    with pytest.raises(EmberIndexError, match="axis 2 is out of bounds"):
        enp.unique(np.ones((2, 2)), axis=2)
    with pytest.raises(EmberValueError, match="0-d array"):
        enp.unique(np.float32(1), axis=0)


@given(data=st.data())
def test_set_operations(data):
    a = data.draw(hnp.arrays(np.int32, st.integers(0, 8), elements=VALUES))
    b = data.draw(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=4),
                             elements=VALUES))
    _same(enp.isin(a, b), np.isin(a, b))
    _same(enp.isin(b, a, invert=True), np.isin(b, a, invert=True))
    _same(enp.union1d(a, b), np.union1d(a, b))
    _same(enp.intersect1d(a, b), np.intersect1d(a, b))
    _same(enp.setdiff1d(a, b), np.setdiff1d(a, b))
    _same(enp.setxor1d(a, b), np.setxor1d(a, b))


def test_intersect1d_and_setdiff1d_with_size_and_indices_match_jax():
    a = np.array([3, 1, 3, 5, 7, 1], np.int32)
    b = np.array([5, 3, 9, 3], np.int32)
    for ours, theirs in zip(enp.intersect1d(a, b, return_indices=True),
                            np.intersect1d(a, b, return_indices=True)):
        _same(ours, theirs)
    with ember.config.override(backend="reference"):
        padded = ember.jit(lambda x, y: enp.intersect1d(x, y, return_indices=True, size=3))(a, b)
        difference = ember.jit(lambda x, y: enp.setdiff1d(x, y, size=4, fill_value=-1))(a, b)
    for ours, theirs in zip(padded, ([3, 5, 3], [0, 3, 6], [1, 0, 4])):  # JAX's padding
        _same(ours, theirs)
    _same(difference, [1, 7, -1, -1])
    nans = np.array([1.0, np.nan, np.nan], np.float32), np.array([np.nan], np.float32)
    _same(enp.setdiff1d(*nans), np.setdiff1d(*nans))
    _same(enp.intersect1d(*nans), np.intersect1d(*nans))
    with pytest.raises(ConcretizationError, match="setdiff1d without size="):
        ember.jit(enp.setdiff1d)(a, b)
    jnp = pytest.importorskip("jax.numpy")
    for ours, theirs in zip(padded, jnp.intersect1d(a, b, return_indices=True, size=3)):
        _same(ours, theirs)
    _same(difference, jnp.setdiff1d(a, b, size=4, fill_value=-1))


def test_setxor1d_with_size_and_nans_matches_jax():
    a, b = np.array([3, 2, 3, 3], np.int32), np.array([3, 4], np.int32)
    with ember.config.override(backend="reference"):
        out = ember.jit(lambda x, y: enp.setxor1d(x, y, size=5))(a, b)
    _same(out, [2, 4, 2, 2, 2])
    _same(enp.setxor1d(a, b, size=4, fill_value=-1), [2, 4, -1, -1])
    nans = np.array([1.0, np.nan], np.float32), np.array([np.nan, 2.0], np.float32)
    _same(enp.setxor1d(*nans), np.setxor1d(*nans))  # each NaN is its own value
    with pytest.raises(ConcretizationError, match="setxor1d without size="):
        ember.jit(enp.setxor1d)(a, b)
    jnp = pytest.importorskip("jax.numpy")
    _same(out, jnp.setxor1d(a, b, size=5))
