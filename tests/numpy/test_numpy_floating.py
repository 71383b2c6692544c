"""frexp, ldexp, modf, spacing (the parts of floats), gcd and lcm against NumPy, bit for
bit, special values and subnormals included; under jit on every backend, vmap and grad
against JAX."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError

DTYPES = [np.float16, np.float32, np.float64]


def _specials(dtype):
    info = np.finfo(dtype)
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, -info.tiny,
                     info.smallest_subnormal, -3 * info.smallest_subnormal, info.max, -info.max,
                     1.0, 0.5, 2.0, 3.0, -5.0, 0.1], dtype)


def _floats(dtype, seed, n=40):
    rng = np.random.default_rng(seed)
    top = np.finfo(dtype).maxexp
    scale = 2.0 ** rng.integers(-top - np.finfo(dtype).nmant, top, n).astype(np.float64)
    with np.errstate(over="ignore"):
        random = (rng.normal(size=n) * scale).astype(dtype)
    return np.concatenate([_specials(dtype), random])


def _bits_equal(actual, expected):
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    same = actual.view(f"u{actual.itemsize}") == expected.view(f"u{expected.itemsize}")
    np.testing.assert_array_equal(same | (np.isnan(actual) & np.isnan(expected)), True)


def _spacing(x):
    """NumPy's spacing; for float16 from nextafter (NumPy's float16 spacing drops the sign
    of negative values and gives 32 at the largest)."""
    if x.dtype != np.float16:
        return np.spacing(x)
    away = np.where(x == 0, np.inf, np.copysign(np.inf, x)).astype(x.dtype)
    return np.nextafter(x, away) - x


@pytest.mark.parametrize("dtype", DTYPES)
@given(seed=st.integers(0, 2**16))
def test_frexp_ldexp_modf_spacing_are_bit_exact(dtype, seed):
    x = _floats(dtype, seed)
    shifts = np.random.default_rng(seed).integers(-2 * np.finfo(dtype).maxexp - 60,
                                                  2 * np.finfo(dtype).maxexp + 60, x.shape)
    with ember.config.override(enable_x64=dtype == np.float64), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mantissa, exponent = enp.frexp(x)
        expected_mantissa, expected_exponent = np.frexp(x)
        _bits_equal(mantissa, expected_mantissa)
        np.testing.assert_array_equal(np.asarray(exponent), expected_exponent)
        _bits_equal(enp.ldexp(x, shifts.astype(np.int32)), np.ldexp(x, shifts.astype(np.int32)))
        for ours, theirs in zip(enp.modf(x), np.modf(x)):
            _bits_equal(ours, theirs)
        _bits_equal(enp.spacing(x), _spacing(x))


def test_under_jit_on_each_backend(backend):
    x = _specials(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mantissa, exponent = ember.jit(enp.frexp)(x)
        _bits_equal(mantissa, np.frexp(x)[0])
        _bits_equal(ember.jit(lambda v: enp.ldexp(v, np.int32(-140)))(x), np.ldexp(x, -140))
        _bits_equal(ember.jit(enp.spacing)(x), _spacing(x))


def test_dtypes_and_grads_match_jax():
    assert enp.ldexp(np.arange(3), 2).dtype == np.float32  # integers become floats
    assert enp.frexp(np.arange(3))[1].dtype == np.int32
    assert float(ember.grad(lambda v: enp.ldexp(v, 3))(np.float32(0))) == 8.0  # JAX says 1
    jax = pytest.importorskip("jax")
    x = np.array([0.7, -3.0, 12.5, 5.0], np.float32)
    for ours, theirs in ((lambda v: enp.ldexp(v, 3).sum(), lambda v: jax.numpy.ldexp(v, 3).sum()),
                         (lambda v: enp.frexp(v)[0].sum(), lambda v: jax.numpy.frexp(v)[0].sum()),
                         (lambda v: enp.modf(v)[0].sum(), lambda v: jax.numpy.modf(v)[0].sum())):
        np.testing.assert_array_equal(np.asarray(ember.grad(ours)(x)),
                                      np.asarray(jax.grad(theirs)(x)))


def test_float_part_errors():
    with pytest.raises(EmberTypeError, match="exponent x2 must be integers, got float32"):
        enp.ldexp(1.0, np.float32(2))
    with pytest.raises(EmberTypeError, match="frexp is not defined for complex dtype complex64"):
        enp.frexp(np.ones(2, np.complex64))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.int64])
@given(data=st.data())
def test_gcd_lcm_match_numpy(dtype, data):
    info = np.iinfo(dtype)
    low = max(info.min + 1, -1000)  # NumPy's |min| overflows; keep lcm within range
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=4))
    x, y = (data.draw(hnp.arrays(dtype, s, elements=st.integers(max(low, info.min),
                                                                min(1000, info.max) // 10)))
            for s in shapes.input_shapes)
    with ember.config.override(enable_x64=dtype == np.int64):
        np.testing.assert_array_equal(np.asarray(enp.gcd(x, y)), np.gcd(x, y))
        if dtype != np.int8:
            np.testing.assert_array_equal(np.asarray(enp.lcm(x, y)), np.lcm(x, y))


def test_gcd_lcm_under_jit_and_vmap():
    a = np.array([12, 0, -21, 7, 0], np.int32)
    b = np.array([18, 5, 14, 0, 0], np.int32)
    with ember.config.override(backend="reference"):
        np.testing.assert_array_equal(np.asarray(ember.jit(enp.gcd)(a, b)), np.gcd(a, b))
        np.testing.assert_array_equal(np.asarray(ember.vmap(enp.lcm)(a, b)), np.lcm(a, b))
    with pytest.raises(EmberTypeError, match="gcd needs integer arguments, got float32"):
        enp.gcd(np.float32(4), 2)
