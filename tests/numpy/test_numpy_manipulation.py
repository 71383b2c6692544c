"""Shape manipulation, joining and splitting against NumPy."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError

SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_array_equal(actual, expected)


def _array(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


@given(shape=SHAPES, data=st.data())
def test_reshape_transpose_and_axis_moves(shape, data):
    x = _array(shape)
    _same(enp.reshape(x, (-1,)), x.reshape(-1))
    _same(enp.reshape(x, (x.shape[0], -1), order="F"), x.reshape((x.shape[0], -1), order="F"))
    _same(enp.ravel(x, order="F"), x.ravel(order="F"))
    perm = data.draw(st.permutations(range(x.ndim)))
    _same(enp.transpose(x, perm), x.transpose(perm))
    _same(enp.permute_dims(x, perm), x.transpose(perm))
    _same(enp.transpose(x), x.T)
    a, b = data.draw(st.integers(-x.ndim, x.ndim - 1)), data.draw(st.integers(-x.ndim, x.ndim - 1))
    _same(enp.swapaxes(x, a, b), np.swapaxes(x, a, b))
    if a % x.ndim != b % x.ndim:
        _same(enp.moveaxis(x, [a, b], [b, a]), np.moveaxis(x, [a, b], [b, a]))
    _same(enp.moveaxis(x, a, b), np.moveaxis(x, a, b))
    _same(enp.expand_dims(x, (0, -1)), np.expand_dims(x, (0, -1)))
    _same(enp.squeeze(enp.expand_dims(x, a)), np.squeeze(np.expand_dims(x, a)))
    _same(enp.flip(x, a), np.flip(x, a))
    _same(enp.flip(x), np.flip(x))
    if x.ndim >= 2:
        _same(enp.matrix_transpose(x), np.swapaxes(x, -1, -2))
        _same(x.mT, np.swapaxes(x, -1, -2))
        for k in range(-1, 4):
            _same(enp.rot90(x, k), np.rot90(x, k))
            _same(enp.rot90(x, k, axes=(1, 0)), np.rot90(x, k, axes=(1, 0)))


def test_array_methods_and_shape_helpers():
    x = enp.arange(6).reshape(2, 3)
    assert x.reshape(3, 2).shape == (3, 2) and x.reshape((6,)).shape == (6,)
    assert x.transpose(1, 0).shape == (3, 2) and x.T.shape == (3, 2)
    assert x.flatten().shape == (6,) and enp.shape(x) == (2, 3)
    assert enp.ndim(x) == 2 and enp.size(x) == 6 and enp.size(x, 1) == 3
    _same(enp.fliplr(x), np.fliplr(np.arange(6).reshape(2, 3)))
    _same(enp.flipud(x), np.flipud(np.arange(6).reshape(2, 3)))


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_broadcasting(shapes):
    arrays = [_array(s) for s in shapes.input_shapes]
    assert enp.broadcast_shapes(*shapes.input_shapes) == shapes.result_shape
    for ours, theirs in zip(enp.broadcast_arrays(*arrays), np.broadcast_arrays(*arrays)):
        _same(ours, theirs)
    _same(enp.broadcast_to(arrays[0], shapes.result_shape),
          np.broadcast_to(arrays[0], shapes.result_shape))


def test_broadcast_shapes_takes_integers_and_names_bad_shapes():
    assert enp.broadcast_shapes(3, (2, 1)) == np.broadcast_shapes(3, (2, 1))
    with pytest.raises(EmberTypeError, match="takes shapes .tuples of integers., got object"):
        enp.broadcast_shapes((2,), object())
    with pytest.raises(EmberTypeError, match=r"got \(2, 'a'\)"):
        enp.broadcast_shapes((2, "a"))


def test_atleast():
    for value in (np.float32(1), np.arange(2.0), np.ones((2, 3))):
        _same(enp.atleast_1d(value), np.atleast_1d(value))
        _same(enp.atleast_2d(value), np.atleast_2d(value))
        _same(enp.atleast_3d(value), np.atleast_3d(value))
    assert len(enp.atleast_1d(1, [2, 3])) == 2


@given(shape=SHAPES, shift=st.integers(-7, 7), data=st.data())
def test_roll_matches_numpy(shape, shift, data):
    x = _array(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    _same(enp.roll(x, shift, axis), np.roll(x, shift, axis))
    if x.ndim >= 2:
        _same(enp.roll(x, (shift, 1), (0, 1)), np.roll(x, (shift, 1), (0, 1)))


def test_roll_with_a_traced_shift():
    x = np.arange(10.0).reshape(2, 5)
    with ember.config.override(backend="reference"):
        rolled = ember.jit(lambda x, s: enp.roll(x, s, axis=1))
        for shift in (-7, -1, 0, 3, 12):
            _same(rolled(x, shift), np.roll(x, shift, axis=1))


@given(shape=SHAPES, count=st.integers(1, 3), data=st.data())
def test_concatenate_and_stack(shape, count, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    arrays = [_array(shape) + i for i in range(count)]
    _same(enp.concatenate(arrays, axis), np.concatenate(arrays, axis))
    _same(enp.concat(arrays, axis=axis), np.concatenate(arrays, axis))
    _same(enp.concatenate(arrays, axis=None), np.concatenate(arrays, axis=None))
    new_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    _same(enp.stack(arrays, new_axis), np.stack(arrays, new_axis))
    for name in ("hstack", "vstack", "dstack", "column_stack"):
        _same(getattr(enp, name)(arrays), getattr(np, name)(arrays))
    assert enp.concatenate([np.ones(2, np.int8), np.ones(1, np.float32)]).dtype == np.float32


@given(size=st.integers(0, 9), sections=st.integers(1, 4), data=st.data())
def test_split_family(size, sections, data):
    x = _array((2, size))
    for ours, theirs in zip(enp.array_split(x, sections, axis=1),
                            np.array_split(x, sections, axis=1)):
        _same(ours, theirs)
    points = sorted(data.draw(st.lists(st.integers(-size - 2, size + 2), max_size=3)))
    ours, theirs = enp.split(x, points, axis=1), np.split(x, points, axis=1)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _same(a, b)
    if size % sections == 0:
        for a, b in zip(enp.split(x, sections, 1), np.split(x, sections, 1)):
            _same(a, b)
    for a, b in zip(enp.unstack(x, axis=1), list(np.moveaxis(x, 1, 0))):
        _same(a, b)


def test_hsplit_vsplit_dsplit():
    x = _array((4, 4, 2))
    pairs = [(enp.hsplit(x, 2), np.hsplit(x, 2)), (enp.vsplit(x, [1]), np.vsplit(x, [1])),
             (enp.dsplit(x, 2), np.dsplit(x, 2))]
    for ours, theirs in pairs:
        for a, b in zip(ours, theirs):
            _same(a, b)


@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
       reps=st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_tile_matches_numpy(shape, reps):
    x = _array(shape)
    _same(enp.tile(x, reps), np.tile(x, reps))
    _same(enp.tile(x, reps[0]), np.tile(x, reps[0]))


@given(shape=SHAPES, repeats=st.integers(0, 3), data=st.data())
def test_repeat_matches_numpy(shape, repeats, data):
    x = _array(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    _same(enp.repeat(x, repeats, axis), np.repeat(x, repeats, axis))
    size = x.size if axis is None else x.shape[axis]
    counts = data.draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
    _same(enp.repeat(x, np.array(counts), axis), np.repeat(x, counts, axis))


def test_repeat_with_traced_counts_needs_total_length():
    x = np.array([10, 20, 30])
    counts = np.array([2, 0, 1])
    with ember.config.override(backend="reference"):
        out = ember.jit(lambda c: enp.repeat(x, c, total_repeat_length=3))(counts)
        _same(out, np.repeat(x, counts))
        padded = ember.jit(lambda c: enp.repeat(x, c, total_repeat_length=5))(counts)
    _same(padded, [10, 10, 30, 30, 30])
    with pytest.raises(ember.errors.ConcretizationError, match="total_repeat_length"):
        ember.jit(lambda c: enp.repeat(x, c))(counts)


PAD_MODES = ["constant", "edge", "reflect", "symmetric", "wrap", "empty"]


@pytest.mark.parametrize("mode", PAD_MODES)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), data=st.data())
def test_pad_matches_numpy(mode, shape, data):
    x = _array(shape)
    widths = [tuple(data.draw(st.lists(st.integers(0, 6), min_size=2, max_size=2)))
              for _ in shape]
    expected = np.pad(x, widths, mode=mode)
    if mode == "empty":
        expected = np.pad(x, widths)
    _same(enp.pad(x, widths, mode=mode), expected)


def test_pad_widths_and_constants():
    x = _array((2, 3))
    _same(enp.pad(x, 1), np.pad(x, 1))
    _same(enp.pad(x, (1, 2)), np.pad(x, (1, 2)))
    _same(enp.pad(x, ((1, 0), (0, 2)), constant_values=((7, 8), (9, 10))),
          np.pad(x, ((1, 0), (0, 2)), constant_values=((7, 8), (9, 10))))
    _same(enp.pad(x, 2, constant_values=-1), np.pad(x, 2, constant_values=-1))
    with pytest.raises(EmberValueError, match="mode 'median' is not supported"):
        enp.pad(x, 1, mode="median")
    with pytest.raises(EmberValueError, match="pad widths must be non-negative"):
        enp.pad(x, -1)
    with pytest.raises(EmberValueError, match="cannot extend the empty axis 0"):
        enp.pad(np.ones((0, 2)), 1, mode="edge")


def test_append():
    _same(enp.append(np.ones((2, 2)), np.zeros((1, 2)), axis=0),
          np.append(np.ones((2, 2)), np.zeros((1, 2)), axis=0))
    _same(enp.append(np.ones(2), [[3, 4]]), np.append(np.ones(2), [[3, 4]]))


def test_errors_name_shapes_and_axes():
    x = _array((2, 3))
    with pytest.raises(EmberValueError, match=r"cannot reshape array of shape \(2, 3\) .size 6. "
                                              r"into shape \(4, -1\)"):
        enp.reshape(x, (4, -1))
    with pytest.raises(EmberValueError, match="can only infer one dimension"):
        enp.reshape(x, (-1, -1))
    with pytest.raises(EmberIndexError, match="axis 2 is out of bounds for an array of 2 "
                                              "dimensions"):
        enp.flip(x, 2)
    with pytest.raises(EmberValueError, match=r"squeeze: axis 1 of shape \(2, 3\) has size 3"):
        enp.squeeze(x, 1)
    with pytest.raises(EmberValueError, match=r"cannot broadcast shape \(2, 3\) to shape \(3,\)"):
        enp.broadcast_to(x, (3,))
    with pytest.raises(EmberValueError, match=r"concatenate: shapes \[\(2, 3\), \(2, 2\)\] "
                                              "differ outside axis 0"):
        enp.concatenate([x, _array((2, 2))])
    with pytest.raises(EmberValueError, match="stack: all arrays need the same shape"):
        enp.stack([x, x.T])
    with pytest.raises(EmberValueError, match="does not divide into 4 equal sections"):
        enp.split(x, 4, axis=1)
    with pytest.raises(EmberValueError, match="matrix_transpose needs at least 2 dimensions"):
        enp.matrix_transpose(np.ones(3))
    with pytest.raises(EmberValueError, match="repeated axis"):
        enp.transpose(x, (0, 0))
    with pytest.raises(EmberValueError, match="needs at least one array"):
        enp.concatenate([])


def test_block_matches_numpy():
    a, b, v = np.ones((2, 2)), np.zeros((2, 3)), np.arange(5.0)
    for blocks in ([a, b], [[a, b], [b[:, :2], 3 * a[:, :1], a]], [1, 2, 3], [[1, 2], [3, 4]],
                   [v, v], [[[a]]], 5.0):
        _same(enp.block(blocks), np.block(blocks))
    with pytest.raises(EmberValueError, match=r"nest to different depths \[0, 1\]"):
        enp.block([[a], a])
    with pytest.raises(EmberTypeError, match="is a tuple; only lists nest blocks"):
        enp.block((a, b))
    with pytest.raises(EmberValueError, match=r"arrays\[1\] is an empty list"):
        enp.block([[a], []])


def test_rollaxis_matches_numpy():
    x = np.zeros((2, 3, 4, 5))
    for axis in range(-4, 4):
        for start in range(-4, 5):
            assert enp.rollaxis(x, axis, start).shape == np.rollaxis(x, axis, start).shape
    with pytest.raises(EmberIndexError, match="start 5 is out of bounds"):
        enp.rollaxis(x, 0, 5)
