"""Indexing (basic, advanced, masks) and .at[] updates against NumPy; out-of-bounds
semantics; errors; jit against eager."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberIndexError, EmberValueError

SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)


def _array(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_array_equal(actual, expected)


@st.composite
def mixed_indices(draw, shape):
    """Per axis: an int, a slice, a (shared-shape) integer array, or None / Ellipsis."""
    array_shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    entries = []
    for size in shape:
        kind = draw(st.sampled_from(["int", "slice", "array", "array", "none"]))
        if kind == "int":
            entries.append(draw(st.integers(-size, size - 1)))
        elif kind == "slice":
            entries.append(slice(draw(st.one_of(st.none(), st.integers(-size - 2, size + 2))),
                                 draw(st.one_of(st.none(), st.integers(-size - 2, size + 2))),
                                 draw(st.sampled_from([None, 1, 2, -1, -2, 3]))))
        elif kind == "array":
            entries.append(draw(hnp.arrays(np.int32, array_shape,
                                           elements=st.integers(-size, size - 1))))
        else:
            entries.append(None)
            entries.append(slice(None))
    count = draw(st.integers(0, len(entries)))
    return tuple(entries[:count])


@given(shape=SHAPES, data=st.data())
def test_basic_indexing_matches_numpy(shape, data):
    x = _array(shape)
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    _same(enp.asarray(x)[index], x[index])


@given(shape=SHAPES, data=st.data())
def test_mixed_advanced_indexing_matches_numpy(shape, data):
    x = _array(shape)
    index = data.draw(mixed_indices(shape))
    _same(enp.asarray(x)[index], x[index])


@given(shape=SHAPES, data=st.data())
def test_boolean_masks_match_numpy(shape, data):
    x = _array(shape)
    dims = data.draw(st.integers(0, len(shape)))
    start = data.draw(st.integers(0, len(shape) - dims))
    mask = data.draw(hnp.arrays(np.bool_, shape[start:start + dims]))
    index = (slice(None),) * start + (mask,)
    _same(enp.asarray(x)[index], x[index])
    _same(enp.asarray(x)[x > 3], x[x > 3])
    _same(enp.asarray(x)[True], x[True])
    _same(enp.asarray(x)[False], x[False])


def test_special_index_forms():
    x = _array((3, 4, 5))
    ex = enp.asarray(x)
    for index in [(Ellipsis, 1), (1, Ellipsis, None), ([0, 2], slice(None), [1, 3]),
                  (slice(None), [0, 2], [[1], [3]]), ([[0], [1]], 0, slice(1, 3)),
                  ([True, False, True],), (np.array(1),), (enp.asarray([2, 0]), 1),
                  (slice(None, None, -1), [-1, -2]), ([], ), ([[]],)]:
        _same(ex[index], x[tuple(np.asarray(i) if isinstance(i, enp.ndarray) else i
                                 for i in index)])
    assert ex[1, 2, 3].shape == () and float(ex[-1, -1, -1]) == 59.0


def test_iteration_and_scalar_conversion():
    x = enp.asarray([[1, 2], [3, 4]])
    rows = list(x)
    assert len(rows) == 2 and rows[1].tolist() == [3, 4]
    assert int(x[1, 0]) == 3 and x[0, 1].item() == 2


UPDATES = [("set", None), ("add", np.add), ("multiply", np.multiply), ("min", np.minimum),
           ("max", np.maximum)]


@pytest.mark.parametrize("method,ufunc", UPDATES, ids=[u[0] for u in UPDATES])
@given(shape=SHAPES, data=st.data())
def test_at_updates_match_numpy(method, ufunc, shape, data):
    x = _array(shape)
    index = data.draw(st.one_of(mixed_indices(shape), hnp.basic_indices(shape)))
    target_shape = x[index].shape
    values = data.draw(hnp.arrays(np.float32, target_shape, elements=st.integers(-9, 9)))
    expected = x.copy()
    if method == "set":
        if np.unique(np.arange(x.size).reshape(shape)[index]).size != int(np.prod(target_shape)):
            return  # repeated positions: which write wins is unspecified
        expected[index] = values
    else:
        ufunc.at(expected, index, values)
    _same(getattr(enp.asarray(x).at[index], method)(values), expected)


def test_at_updates_broadcast_and_keep_dtype():
    x = enp.zeros((3, 4), dtype="int32")
    out = x.at[1].set(7)
    assert out.dtype == np.int32 and out.tolist()[1] == [7, 7, 7, 7]
    assert x.at[:, 0].add(np.array([1.9, 2.9, 3.9])).tolist()[2][0] == 3  # cast to int32
    assert x.at[[0, 0, 2], 1].add(1).tolist()[0][1] == 2  # repeated indices accumulate
    y = enp.ones(3).at[1].mul(5.0).at[2].divide(4.0)
    np.testing.assert_allclose(np.asarray(y), [1, 5, 0.25])
    assert enp.arange(4.0).at[1:3].apply(lambda v: v * 10).tolist() == [0, 10, 20, 3]
    assert enp.arange(4.0).at[2].get() == 2.0
    with pytest.raises(EmberValueError, match=r"cannot broadcast update values of shape \(3,\) "
                                              r"to the indexed shape \(2,\)"):
        enp.arange(4.0).at[:2].set(np.ones(3))


def test_out_of_bounds_follow_jax():
    x = enp.arange(5.0)
    _same(x[np.array([7, -9, 2])], [4.0, 0.0, 2.0])  # reads clamp
    filled = x.at[np.array([7, 1])].get(mode="fill", fill_value=-1.0)
    _same(filled, [-1.0, 1.0])
    assert np.isnan(np.asarray(x.at[np.array([9])].get(mode="fill"))).all()
    _same(x.at[7].set(100.0), np.arange(5.0))  # writes drop
    _same(x.at[np.array([-9, 0])].add(1.0), [1, 1, 2, 3, 4])
    _same(x.at[np.array([9])].set(-1.0, mode="clip"), [0, 1, 2, 3, -1])
    # Static integers clamp too (negative ones count from the end first).
    assert float(x[5]) == 4.0 and float(x[-6]) == 0.0 and float(x[-100]) == 0.0
    _same(enp.arange(12.0).reshape(3, 4)[5, -9], 8.0)
    with pytest.raises(EmberIndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        enp.zeros(0)[0]


STATIC_OUT_OF_BOUNDS = [11, -11, -12, 100, -100, (5,), (-5,), (1, 9), (5, -9), (-4, 4),
                        (5, [0, 1]), ([0, 1], 7), (Ellipsis, 11), (None, 11)]


@pytest.mark.parametrize("index", STATIC_OUT_OF_BOUNDS, ids=str)
def test_static_out_of_bounds_integers_clamp_as_jax(index):
    jnp = pytest.importorskip("jax.numpy")
    ndim = 1 if isinstance(index, int) or Ellipsis in index or None in index else 2
    x = np.arange(10.0 if ndim == 1 else 12.0, dtype=np.float32)
    x = x if ndim == 1 else x.reshape(3, 4)
    _same(enp.asarray(x)[index], np.asarray(jnp.asarray(x)[index]))


def test_out_of_bounds_under_jit():
    x = np.arange(5.0, dtype=np.float32)
    with ember.config.override(backend="reference"):
        read = ember.jit(lambda x, i: x[i])
        assert float(read(x, 10)) == 4.0 and float(read(x, -10)) == 0.0
        write = ember.jit(lambda x, i: x.at[i].set(-1.0))
        _same(write(x, 7), x)
        _same(write(x, -2), [0, 1, 2, -1, 4])


def test_take_and_take_along_axis():
    x = _array((3, 4))
    _same(enp.take(x, [0, 2], axis=1), np.take(x, [0, 2], axis=1))
    _same(enp.take(x, [[5, 1]]), np.take(x, [[5, 1]]))
    _same(enp.take(x, [7, -9], axis=0, mode="wrap"), np.take(x, [7, -9], axis=0, mode="wrap"))
    _same(enp.take(x, [7], axis=0, mode="clip"), np.take(x, [7], axis=0, mode="clip"))
    assert np.isnan(np.asarray(enp.take(x, [9], axis=0))).all()  # default: fill, as JAX
    order = np.argsort(-x, axis=1)
    _same(enp.take_along_axis(x, order, axis=1), np.take_along_axis(x, order, axis=1))
    rows = np.argsort(-x, axis=0)[:2]
    _same(enp.take_along_axis(x, rows, axis=0), np.take_along_axis(x, rows, axis=0))
    _same(enp.take_along_axis(x, np.array([11, 0]), axis=None),
          np.take_along_axis(x, np.array([11, 0]), axis=None))
    _same(enp.take_along_axis(x, np.array([[9]]), axis=1, mode="fill", fill_value=-1.0),
          np.full((3, 1), -1.0))


@settings(max_examples=15)
@given(shape=SHAPES, data=st.data())
def test_indexing_under_jit_matches_eager(shape, data):
    x = _array(shape)
    index = data.draw(mixed_indices(shape))
    arrays = [i for i in index if isinstance(i, np.ndarray)]
    positions = [k for k, i in enumerate(index) if isinstance(i, np.ndarray)]

    def f(x, *traced):
        full = list(index)
        for k, value in zip(positions, traced):
            full[k] = value
        return x[tuple(full)], x.at[tuple(full)].add(1.0)

    with ember.config.override(backend="reference"):
        read, updated = ember.jit(f)(x, *arrays)
    eager_read, eager_updated = f(enp.asarray(x), *arrays)
    _same(read, np.asarray(eager_read))
    _same(updated, np.asarray(eager_updated))


def test_indexing_errors():
    x = enp.asarray(_array((2, 3)))
    with pytest.raises(EmberIndexError, match="too many indices for array: array is "
                                              "2-dimensional, but 3 were indexed"):
        x[0, 0, 0]
    with pytest.raises(EmberIndexError, match="only have a single ellipsis"):
        x[..., ...]
    with pytest.raises(EmberIndexError, match="must be of integer or boolean type, got float"):
        x[np.array([0.5])]
    with pytest.raises(EmberIndexError, match="only integers, slices"):
        x["a"]
    with pytest.raises(EmberIndexError, match=r"boolean index of shape \(3,\) does not match "
                                              r"the indexed axes \(0,\) of shape \(2,\)"):
        x[np.array([True, False, True])]
    with pytest.raises(EmberIndexError, match="boolean mask indexing needs a concrete mask.*"
                                              "ember.numpy.where.*size="):
        ember.jit(lambda x: x[x > 1])(x)
    with pytest.raises(EmberIndexError, match="slice bounds must be static integers.*"
                                              "dynamic_slice"):
        ember.jit(lambda x, i: x[i:i + 1])(x, 0)
    with pytest.raises(TypeError, match="immutable.*x.at\\[idx\\].set"):
        x[0] = 1
