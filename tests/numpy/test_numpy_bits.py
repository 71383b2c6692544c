"""packbits and unpackbits against NumPy (every axis, bit order and count), and view."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError, EmberValueError


@pytest.mark.parametrize("bitorder", ["big", "little"])
@given(bits=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=11),
                       elements=st.integers(0, 2)), data=st.data())
def test_pack_and_unpack_match_numpy(bitorder, bits, data):
    axis = data.draw(st.none() | st.integers(-bits.ndim, bits.ndim - 1))
    packed = enp.packbits(bits, axis, bitorder)
    expected = np.packbits(bits, axis, bitorder=bitorder)
    assert packed.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(packed), expected)
    count = data.draw(st.none() | st.integers(-20, 40))
    available = 8 * (expected.size if axis is None else expected.shape[axis])
    if count is not None and count < -available:
        with pytest.raises(EmberValueError, match="drops more than the"):
            enp.unpackbits(expected, axis, count, bitorder)
        return
    np.testing.assert_array_equal(np.asarray(enp.unpackbits(expected, axis, count, bitorder)),
                                  np.unpackbits(expected, axis, count, bitorder=bitorder))


def test_under_jit_and_errors():
    bits = np.array([[1, 0, 1], [0, 1, 1]], bool)
    with ember.config.override(backend="reference"):
        packed = ember.jit(lambda b: enp.packbits(b, 1))(bits)
    np.testing.assert_array_equal(np.asarray(packed), np.packbits(bits, 1))
    with pytest.raises(EmberTypeError, match="unpackbits needs uint8 input, got int32"):
        enp.unpackbits(np.ones(2, np.int32))
    with pytest.raises(EmberTypeError, match="packbits needs integers or booleans, got float32"):
        enp.packbits(np.ones(2, np.float32))
    with pytest.raises(EmberValueError, match="bitorder must be 'big' or 'little'"):
        enp.packbits(bits, bitorder="middle")


VIEW_CASES = [(np.float32, np.uint32), (np.float32, np.uint8), (np.float32, np.int16),
              (np.uint8, np.float32), (np.int16, np.float32), (np.float32, np.float16),
              (np.bool_, np.uint8), (np.uint8, np.bool_), (np.int8, np.bool_)]


@pytest.mark.parametrize("source,target", VIEW_CASES, ids=str)
def test_view_is_numpys_view(source, target):
    bits = np.random.default_rng(5).integers(0, 256, (3, 8), dtype=np.uint8)
    x = (bits % 2).astype(bool) if source is np.bool_ else bits.view(source)
    got = enp.asarray(x).view(target)
    want = x.view(target)
    assert got.shape == want.shape and got.dtype == want.dtype
    if target is np.bool_:
        want = want.astype(np.uint8) != 0  # NumPy keeps the byte; a bool is 0 or 1 here
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))
    jitted = ember.jit(lambda v: v.view(target))(x)
    np.testing.assert_array_equal(np.asarray(jitted).view(np.uint8), want.view(np.uint8))


def test_view_refuses_uneven_last_axis():
    with pytest.raises(EmberValueError, match="multiple of 4"):
        enp.zeros((2, 3), np.uint8).view(np.float32)


def test_view_as_jax():
    jax_numpy = pytest.importorskip("jax.numpy")
    x = np.array([[1.0, -2.0], [np.nan, -0.0]], np.float32)
    for target in (np.uint32, np.uint8, np.int16, np.float16):
        ours = np.asarray(enp.asarray(x).view(target))
        theirs = np.asarray(jax_numpy.asarray(x).view(target))
        np.testing.assert_array_equal(ours.view(np.uint8), theirs.view(np.uint8))
