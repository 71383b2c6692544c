"""Cumulative reductions against NumPy; errors; jit vs eager."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberIndexError, EmberTypeError

UFUNCS = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum,
          "cummin": np.minimum, "cumlogsumexp": np.logaddexp}


@st.composite
def array_and_axis(draw, dtype=np.float32):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 5, shape).astype(dtype), axis
    return rng.standard_normal(shape).astype(dtype), axis


def expected(name, x, axis, reverse):
    values = np.flip(x, axis) if reverse else x
    out = UFUNCS[name].accumulate(values.astype(np.float64), axis=axis)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("name", sorted(UFUNCS))
@pytest.mark.parametrize("reverse", [False, True])
@given(data=array_and_axis())
def test_matches_numpy(name, reverse, data):
    x, axis = data
    out = getattr(lax, name)(x, axis=axis, reverse=reverse)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(np.asarray(out), expected(name, x, axis, reverse), rtol=2e-5,
                               atol=1e-5)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin"])
@given(data=array_and_axis(np.int32))
def test_integers_keep_dtype(name, data):
    x, axis = data
    out = getattr(lax, name)(x, axis)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), UFUNCS[name].accumulate(x, axis=axis))


def test_nan_propagates_in_cummax():
    x = np.array([1.0, np.nan, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.cummax(x)), [1.0, np.nan, np.nan])
    np.testing.assert_array_equal(np.asarray(lax.cummin(x, reverse=True)), [np.nan, np.nan, 3.0])


def test_cumlogsumexp_does_not_overflow():
    x = np.array([1000.0, 1000.0], np.float32)
    np.testing.assert_allclose(np.asarray(lax.cumlogsumexp(x)), [1000.0, 1000.0 + np.log(2)])


def test_jit_matches_eager():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for name in UFUNCS:
        fn = lambda v: getattr(lax, name)(v, axis=1, reverse=True)  # noqa: E731
        np.testing.assert_allclose(np.asarray(ember.jit(fn)(x)), np.asarray(fn(x)), rtol=1e-6)


def test_errors():
    with pytest.raises(EmberIndexError, match="cumsum: axis 2 is out of range .* rank 2"):
        lax.cumsum(np.zeros((2, 3), np.float32), axis=2)
    with pytest.raises(EmberTypeError, match="cumlogsumexp does not accept dtype int32"):
        lax.cumlogsumexp(np.zeros(3, np.int32))
    with pytest.raises(EmberTypeError, match="cumsum does not accept dtype bool"):
        lax.cumsum(np.zeros(3, bool))
    with pytest.raises(EmberTypeError, match="cummax does not accept dtype complex64"):
        lax.cummax(np.zeros(3, np.complex64))
