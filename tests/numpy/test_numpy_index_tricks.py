"""indices, ix_, unravel_index, ravel_multi_index, the *_indices functions and the index
objects (mgrid, ogrid, r_, c_, s_, index_exp) against NumPy and JAX: values, shapes and
dtypes."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError


def _same(actual, expected):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same(a, e)
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def _int32(values):
    if isinstance(values, (tuple, list)):
        return type(values)(_int32(v) for v in values)
    return np.asarray(values).astype(np.int32)


@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
       sparse=st.booleans())
def test_indices_match_numpy(shape, sparse):
    out = enp.indices(shape, sparse=sparse)
    _same(out, np.indices(shape, sparse=sparse))
    assert all(np.asarray(o).dtype == np.int32 for o in (out if sparse else [out]))


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), data=st.data())
def test_unravel_and_ravel_round_trip_as_numpy(shape, data):
    size = int(np.prod(shape))
    flat = np.array(data.draw(st.lists(st.integers(0, size - 1), max_size=6)), np.int32)
    coordinates = enp.unravel_index(flat, shape)
    _same(coordinates, _int32(np.unravel_index(flat, shape)))
    for order in ("C", "F"):
        expected = np.ravel_multi_index(np.unravel_index(flat, shape), shape, order=order)
        _same(enp.ravel_multi_index(np.unravel_index(flat, shape), shape, order=order), expected)


def test_out_of_range_indices_follow_jax():
    flat = np.array([0, 5, 11, 12, -1, -13], np.int32)
    clipped = ([0, 1, 2, 2, 2, 0], [0, 1, 3, 3, 3, 0])  # negatives count from the end
    _same(enp.unravel_index(flat, (3, 4)), clipped)
    with ember.config.override(backend="reference"):
        _same(ember.jit(lambda i: enp.unravel_index(i, (3, 4)))(flat), clipped)
    coordinates = (np.array([0, 2, 5], np.int32), np.array([1, 3, -1], np.int32))
    for mode in ("clip", "wrap"):
        _same(enp.ravel_multi_index(coordinates, (3, 4), mode=mode),
              np.ravel_multi_index(coordinates, (3, 4), mode=mode))
    with pytest.raises(EmberIndexError, match="out of range for dimension of size 3"):
        enp.ravel_multi_index(coordinates, (3, 4))
    jnp = pytest.importorskip("jax.numpy")
    _same(enp.unravel_index(flat, (3, 4)), jnp.unravel_index(flat, (3, 4)))


def test_static_index_functions_match_numpy():
    _same(enp.diag_indices(3, 3), _int32(np.diag_indices(3, 3)))
    _same(enp.diag_indices_from(np.ones((2, 2))), _int32(np.diag_indices_from(np.ones((2, 2)))))
    for k in (-1, 0, 2):
        _same(enp.tril_indices(3, k, 4), _int32(np.tril_indices(3, k, 4)))
        _same(enp.triu_indices(4, k), _int32(np.triu_indices(4, k)))
        _same(enp.tril_indices_from(np.ones((3, 5)), k),
              _int32(np.tril_indices_from(np.ones((3, 5)), k)))
        _same(enp.triu_indices_from(np.ones((5, 3)), k),
              _int32(np.triu_indices_from(np.ones((5, 3)), k)))
        _same(enp.mask_indices(3, enp.triu, k), _int32(np.mask_indices(3, np.triu, k)))
    rows, cols = np.array([0, 2]), np.array([True, False, True, True])
    _same(enp.ix_(rows, cols), _int32(np.ix_(rows, cols)))
    assert enp.tril_indices(3)[0].dtype == np.int32


GRIDS = [  # each evaluated with ember.numpy, NumPy and JAX
    lambda m: m.mgrid[0:3, 0:1:3j], lambda m: m.mgrid[-1:2], lambda m: m.ogrid[0:3, 0:2],
    lambda m: m.r_[np.int8([1, 2]), 3], lambda m: m.r_["r", 1, 2, 3],
    lambda m: m.r_["c", 1, 2], lambda m: m.r_["0,2,0", [1, 2, 3], [4, 5, 6]],
    lambda m: m.r_["1,3,-2", np.ones((2, 2)), np.zeros((2, 2))],
    lambda m: m.r_[0:1:5j, 3, -1:1], lambda m: m.c_[np.ones((2, 2)), 0:2, [7, 8]],
    lambda m: m.r_["0,2", [1, 2, 3], [4, 5, 6]],
]


@pytest.mark.parametrize("grid", GRIDS)
def test_grids_and_concatenators_match_numpy_and_jax(grid):
    ours = grid(enp)
    _same(ours, [np.asarray(v) for v in grid(np)] if isinstance(ours, list) else grid(np))
    jnp = pytest.importorskip("jax.numpy")
    for a, b in zip(ours if isinstance(ours, list) else [ours],
                    grid(jnp) if isinstance(ours, list) else [grid(jnp)]):
        assert a.dtype == b.dtype  # JAX's canonical dtypes (int32, float32)


def test_index_expressions():
    x = np.arange(10)
    assert x[enp.s_[2:8:2]].tolist() == x[np.s_[2:8:2]].tolist()
    assert enp.index_exp[1:3] == np.index_exp[1:3]


def test_index_trick_errors():
    with pytest.raises(EmberValueError, match=r"1-D, argument 1 has shape \(2, 2\)"):
        enp.ix_([0, 1], np.ones((2, 2), np.int32))
    with pytest.raises(EmberTypeError, match="integer indices, got float32"):
        enp.unravel_index(np.ones(2, np.float32), (2, 2))
    with pytest.raises(EmberValueError, match="2 coordinate arrays for 3 dimensions"):
        enp.ravel_multi_index(([0], [0]), (2, 2, 2))
    with pytest.raises(EmberValueError, match="at least 2 equal dimensions, got shape"):
        enp.diag_indices_from(np.ones((2, 3)))
    with pytest.raises(EmberValueError, match="directive is 'axis"):
        enp.r_["x", 1]
    with pytest.raises(EmberTypeError, match="take slices"):
        enp.mgrid[3]
