"""packbits and unpackbits against NumPy (every axis, bit order and count)."""
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
