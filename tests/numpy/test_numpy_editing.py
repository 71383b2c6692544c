"""delete, insert, compress, choose, place, put, put_along_axis, fill_diagonal, resize
and trim_zeros against NumPy (and JAX where JAX's defaults differ), under jit where the
shapes allow it; their errors."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberIndexError, EmberTypeError, EmberValueError

X = np.arange(12, dtype=np.int32).reshape(3, 4)


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_array_equal(actual, expected)


OBJECTS = st.one_of(st.integers(-4, 3), st.lists(st.integers(-4, 3), max_size=3),
                    st.builds(slice, st.none() | st.integers(-4, 4), st.none() | st.integers(-4, 4),
                              st.sampled_from([None, 1, 2, -1])))


@given(obj=OBJECTS, axis=st.sampled_from([None, 1, -1]))
def test_delete_matches_numpy(obj, axis):
    _same(enp.delete(X, obj, axis), np.delete(X, obj, axis))


def test_delete_with_a_mask_and_traced_unique_indices():
    mask = np.array([True, False, True, False])
    _same(enp.delete(X, mask, 1), np.delete(X, mask, 1))
    with ember.config.override(backend="reference"):
        out = ember.jit(lambda a, i: enp.delete(a, i, 1, assume_unique_indices=True))(
            X, np.array([3, 1], np.int32))
    _same(out, np.delete(X, [1, 3], 1))
    with pytest.raises(ConcretizationError, match="delete.obj=...."):
        ember.jit(lambda a, i: enp.delete(a, i, 1))(X, np.array([1], np.int32))
    with pytest.raises(EmberIndexError, match="index 4 is out of bounds for an axis of size 4"):
        enp.delete(X, [4], 1)


@given(obj=st.one_of(st.integers(-4, 4), st.lists(st.integers(-4, 4), min_size=1, max_size=3)),
       axis=st.sampled_from([None, 1]), data=st.data())
def test_insert_matches_numpy(obj, axis, data):
    count = 1 if isinstance(obj, int) else len(obj)
    column = [[7], [8], [9]]  # one value per row (axis 1 only)
    values = data.draw(st.sampled_from([7, list(range(20, 20 + count))]
                                       + ([column] if axis == 1 else [])))
    _same(enp.insert(X, obj, values, axis), np.insert(X, obj, values, axis))


def test_insert_blocks_slices_and_errors():
    _same(enp.insert(X, 1, [7, 8, 9, 10], 0), np.insert(X, 1, [7, 8, 9, 10], 0))
    _same(enp.insert(X, slice(0, 2), [[5], [6], [7]], 1),
          np.insert(X, slice(0, 2), [[5], [6], [7]], 1))
    _same(enp.insert(X, [1, 1], [10, 20], 1), np.insert(X, [1, 1], [10, 20], 1))
    with pytest.raises(EmberValueError, match=r"values of shape \(1, 3\) do not broadcast to the "
                                              r"inserted shape \(1, 4\)"):
        enp.insert(X, 1, [7, 8, 9], 0)
    with pytest.raises(EmberTypeError, match="obj must be integers, a slice or booleans"):
        enp.insert(X, np.array([1.5]), 0)


def test_compress_and_choose_match_numpy():
    condition = np.array([True, False, True])
    for axis in (None, 0, 1):
        _same(enp.compress(condition, X, axis), np.compress(condition, X, axis))
    with ember.config.override(backend="reference"):
        padded = ember.jit(lambda c, a: enp.compress(c, a, 1, size=3, fill_value=-1))(
            condition, X)
    _same(padded, [[0, 2, -1], [4, 6, -1], [8, 10, -1]])
    with pytest.raises(EmberIndexError, match="true entry beyond the 3 entries along axis 0"):
        enp.compress(np.ones(4, bool), X, 0)
    choices = [np.zeros(3), np.ones(3), 2 * np.ones((2, 3))]
    for index, mode in (([0, 1, 2], "raise"), ([0, 3, -1], "wrap"), ([0, 3, -1], "clip")):
        _same(enp.choose(np.array(index), choices, mode=mode),
              np.choose(np.array(index), choices, mode=mode))
    with pytest.raises(EmberIndexError, match=r"outside \[0, 3\)"):
        enp.choose(np.array([3]), choices)


def _numpy_in_place(fn, x, *args, **kwargs):
    """NumPy's in-place editing function applied to a copy of ``x``."""
    out = np.array(x)
    fn(out, *args, **kwargs)
    return out


def test_place_put_and_put_along_axis_match_numpy_and_jax():
    v = np.arange(5.0, dtype=np.float32)
    _same(enp.place(v, v > 1, [10, 20], inplace=False),
          _numpy_in_place(np.place, v, v > 1, [10, 20]))
    index = np.array([1, 7, -1])
    for mode in ("clip", "wrap"):
        _same(enp.put(v, index, [10.0, 20.0], mode=mode, inplace=False),
              _numpy_in_place(np.put, v, index, [10.0, 20.0], mode=mode))
    _same(enp.put(v, index, [10.0, 20.0], inplace=False), [0, 10, 2, 3, 10])  # JAX drops 7
    order = np.argsort(-X, axis=1)[:, :2]
    _same(enp.put_along_axis(X, order, -1, 1, inplace=False),
          _numpy_in_place(np.put_along_axis, X, order, -1, 1))
    rows = np.array([[2, 0, 1, 2]])
    _same(enp.put_along_axis(X, rows, -1, 0, inplace=False),
          _numpy_in_place(np.put_along_axis, X, rows, -1, 0))
    with ember.config.override(backend="reference"):
        grad = ember.grad(lambda w: enp.put(w, np.array([0, 2]), 0.0, inplace=False).sum())(v)
    _same(grad, [0, 1, 0, 1, 1])
    with pytest.raises(EmberValueError, match="pass inplace=False"):
        enp.put(v, [0], 1.0)
    jnp = pytest.importorskip("jax.numpy")
    _same(enp.put(v, index, [10.0, 20.0], inplace=False),
          jnp.put(v, index, np.array([10.0, 20.0]), inplace=False))


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                        ((3, 5), False), ((3, 3, 3), False)])
def test_fill_diagonal_matches_numpy(shape, wrap):
    expected = np.zeros(shape)
    np.fill_diagonal(expected, [1.0, 2.0], wrap=wrap)
    _same(enp.fill_diagonal(np.zeros(shape), np.array([1.0, 2.0]), wrap=wrap, inplace=False),
          expected)


def test_resize_and_trim_zeros_match_numpy():
    _same(enp.resize(np.arange(3), (2, 4)), np.resize(np.arange(3), (2, 4)))
    _same(enp.resize(np.zeros(0), 3), np.resize(np.zeros(0), 3))
    signal = np.array([0, 0, 1, 2, 0, 3, 0, 0])
    for trim in ("fb", "f", "b"):
        _same(enp.trim_zeros(signal, trim), np.trim_zeros(signal, trim))
    _same(enp.trim_zeros(np.array([[0, 0, 0], [0, 1, 0]])),
          np.trim_zeros(np.array([[0, 0, 0], [0, 1, 0]])))
    _same(enp.trim_zeros(np.zeros(3)), np.trim_zeros(np.zeros(3)))
    with pytest.raises(EmberValueError, match="trim must be made of 'f' and 'b'"):
        enp.trim_zeros(signal, "x")
