"""Elementwise ember.numpy functions against NumPy on generated shapes and values."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError, EmberValueError

SEEDS = st.integers(0, 2**16)
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
PAIR_SHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)


def _values(rng, shape, domain, dtype=np.float32):
    lo, hi = domain
    if np.issubdtype(dtype, np.integer):
        return rng.integers(int(lo), int(hi), shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(lo, hi, shape).astype(dtype)


def _close(actual, expected, rtol=2e-5, atol=2e-6):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual.astype(np.float64) if actual.dtype != np.complex64 else
                               actual, expected, rtol=rtol, atol=atol, equal_nan=True)


WIDE = (-4, 4)
UNARY = [
    ("exp", np.exp, WIDE), ("exp2", np.exp2, WIDE), ("expm1", np.expm1, WIDE),
    ("log", np.log, (0.01, 10)), ("log1p", np.log1p, (-0.9, 10)), ("log2", np.log2, (0.01, 10)),
    ("log10", np.log10, (0.01, 10)), ("sqrt", np.sqrt, (0, 10)), ("cbrt", np.cbrt, WIDE),
    ("sin", np.sin, WIDE), ("cos", np.cos, WIDE), ("tan", np.tan, (-1.4, 1.4)),
    ("arcsin", np.arcsin, (-1, 1)), ("acos", np.arccos, (-1, 1)), ("atan", np.arctan, WIDE),
    ("sinh", np.sinh, WIDE), ("cosh", np.cosh, WIDE), ("tanh", np.tanh, WIDE),
    ("asinh", np.arcsinh, WIDE), ("arccosh", np.arccosh, (1, 10)),
    ("atanh", np.arctanh, (-0.99, 0.99)), ("negative", np.negative, WIDE),
    ("positive", np.positive, WIDE), ("abs", np.abs, WIDE), ("absolute", np.abs, WIDE),
    ("square", np.square, WIDE), ("sign", np.sign, WIDE), ("floor", np.floor, WIDE),
    ("ceil", np.ceil, WIDE), ("trunc", np.trunc, WIDE), ("fix", np.fix, WIDE),
    ("rint", np.rint, WIDE), ("deg2rad", np.deg2rad, (-360, 360)),
    ("rad2deg", np.rad2deg, WIDE), ("reciprocal", np.reciprocal, (0.5, 4)),
    ("sinc", np.sinc, WIDE), ("signbit", np.signbit, WIDE), ("isnan", np.isnan, WIDE),
    ("isfinite", np.isfinite, WIDE), ("isinf", np.isinf, WIDE), ("conj", np.conj, WIDE),
    ("real", np.real, WIDE), ("imag", np.imag, WIDE), ("fabs", np.fabs, WIDE),
]


@pytest.mark.parametrize("name,numpy_fn,domain", UNARY, ids=[u[0] for u in UNARY])
@given(shape=SHAPES, seed=SEEDS)
def test_unary_float32_matches_numpy(name, numpy_fn, domain, shape, seed):
    x = _values(np.random.default_rng(seed), shape, domain)
    out = getattr(enp, name)(x)
    expected = numpy_fn(x.astype(np.float64))
    assert out.dtype == (np.bool_ if expected.dtype == np.bool_ else np.float32)
    _close(out, expected)


INEXACT_OF_INT = ["exp", "log1p", "sqrt", "sin", "arctan", "tanh", "log2", "deg2rad", "fabs"]


@pytest.mark.parametrize("name", INEXACT_OF_INT)
def test_float_functions_of_integers_give_the_default_float(name):
    x = np.array([1, 2, 3], np.int32)
    out = getattr(enp, name)(x)
    assert out.dtype == np.float32
    _close(out, getattr(np, name)(x.astype(np.float64)))


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "rint", "abs", "negative", "square",
                                  "sign", "positive"])
def test_integer_preserving_functions(name):
    x = np.array([-3, 0, 2, 7], np.int32)
    out = getattr(enp, name)(x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), getattr(np, name)(x))


def _positive(x):
    return np.abs(x) + 0.5


BINARY = [
    ("add", np.add, WIDE, WIDE), ("subtract", np.subtract, WIDE, WIDE),
    ("multiply", np.multiply, WIDE, WIDE), ("true_divide", np.true_divide, WIDE, (0.5, 3)),
    ("divide", np.divide, WIDE, (-3, -0.5)), ("maximum", np.maximum, WIDE, WIDE),
    ("minimum", np.minimum, WIDE, WIDE), ("power", np.power, (0.1, 3), WIDE),
    ("pow", np.power, (0.1, 3), (-2, 2)), ("float_power", np.float_power, (0.1, 3), WIDE),
    ("arctan2", np.arctan2, WIDE, WIDE), ("atan2", np.arctan2, WIDE, WIDE),
    ("hypot", np.hypot, WIDE, WIDE), ("copysign", np.copysign, WIDE, WIDE),
    ("logaddexp", np.logaddexp, (-50, 50), (-50, 50)),
    ("logaddexp2", np.logaddexp2, (-50, 50), (-50, 50)), ("fmax", np.fmax, WIDE, WIDE),
    ("fmin", np.fmin, WIDE, WIDE), ("floor_divide", np.floor_divide, WIDE, (0.5, 3)),
    ("remainder", np.remainder, WIDE, (-3, -0.5)), ("mod", np.mod, WIDE, (0.5, 3)),
    ("fmod", np.fmod, WIDE, (0.5, 3)), ("heaviside", np.heaviside, WIDE, WIDE),
    ("equal", np.equal, (-2, 2), (-2, 2)), ("not_equal", np.not_equal, WIDE, WIDE),
    ("less", np.less, WIDE, WIDE), ("less_equal", np.less_equal, WIDE, WIDE),
    ("greater", np.greater, WIDE, WIDE), ("greater_equal", np.greater_equal, WIDE, WIDE),
    ("logical_and", np.logical_and, (-1, 2), (-1, 2)),
    ("logical_or", np.logical_or, (-1, 2), (-1, 2)),
    ("logical_xor", np.logical_xor, (-1, 2), (-1, 2)),
]


@pytest.mark.parametrize("name,numpy_fn,dom1,dom2", BINARY, ids=[b[0] for b in BINARY])
@given(shapes=PAIR_SHAPES, seed=SEEDS)
def test_binary_float32_broadcasts_as_numpy(name, numpy_fn, dom1, dom2, shapes, seed):
    rng = np.random.default_rng(seed)
    (s1, s2), result_shape = shapes.input_shapes, shapes.result_shape
    x, y = _values(rng, s1, dom1), _values(rng, s2, dom2)
    if name in ("equal", "logical_and", "logical_or", "logical_xor"):
        x, y = np.round(x), np.round(y)
    out = getattr(enp, name)(x, y)
    assert out.shape == result_shape
    expected = numpy_fn(x.astype(np.float64), y.astype(np.float64))
    _close(out, expected, rtol=5e-5, atol=1e-5)


INT_BINARY = [
    ("floor_divide", np.floor_divide), ("remainder", np.remainder), ("fmod", np.fmod),
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("maximum", np.maximum), ("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
    ("bitwise_xor", np.bitwise_xor), ("left_shift", np.left_shift),
    ("right_shift", np.right_shift), ("bitwise_left_shift", np.left_shift),
]


@pytest.mark.parametrize("name,numpy_fn", INT_BINARY, ids=[b[0] for b in INT_BINARY])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32])
@given(shapes=PAIR_SHAPES, seed=SEEDS)
def test_integer_binary_match_numpy_including_zero_divisors(name, numpy_fn, dtype, shapes,
                                                            seed):
    rng = np.random.default_rng(seed)
    (s1, s2) = shapes.input_shapes
    signed = np.issubdtype(dtype, np.signedinteger)
    x = _values(rng, s1, (-20 if signed else 0, 20), dtype)
    y = _values(rng, s2, (-5 if signed else 0, 6), dtype)
    if "shift" in name:
        y = np.abs(y) % (8 * np.dtype(dtype).itemsize)
    out = getattr(enp, name)(x, y)
    assert out.dtype == dtype
    with np.errstate(all="ignore"):
        expected = numpy_fn(x, y)
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_integer_division_by_zero_is_zero_as_numpy():
    x = enp.asarray([7, -7, 0])
    assert enp.floor_divide(x, 0).tolist() == [0, 0, 0]
    assert enp.remainder(x, 0).tolist() == [0, 0, 0]
    assert (x // 0).tolist() == [0, 0, 0] and (x % 0).tolist() == [0, 0, 0]
    assert enp.fmod(x, 0).tolist() == [0, 0, 0]
    q, r = divmod(x, enp.asarray([2, 2, 2]))
    assert q.tolist() == [3, -4, 0] and r.tolist() == [1, 1, 0]


def test_float_division_by_zero_follows_ieee():
    x = enp.asarray([1.0, -1.0, 0.0])
    out = np.asarray(enp.floor_divide(x, 0.0))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])
    assert np.isnan(np.asarray(enp.remainder(x, 0.0))).all()


def test_integer_power():
    x = enp.asarray([2, 3, -2], dtype="int32")
    assert (x ** 3).tolist() == [8, 27, -8] and (x ** 3).dtype == np.int32
    assert enp.power(x, enp.asarray([0, 1, 2])).tolist() == [1, 3, 4]
    with pytest.raises(EmberValueError, match="negative integer powers"):
        x ** -1
    assert np.allclose(np.asarray(enp.asarray([2.0, 4.0]) ** -1), [0.5, 0.25])


@given(seed=SEEDS, decimals=st.integers(-2, 3))
def test_round_with_decimals_matches_numpy(seed, decimals):
    x = np.random.default_rng(seed).uniform(-1000, 1000, (6,)).astype(np.float32)
    x[:2] = [2.5, -0.5]  # halves go to even
    np.testing.assert_allclose(np.asarray(enp.round(x, decimals)), np.round(x, decimals),
                               rtol=1e-6, atol=1e-3 * 10.0 ** -decimals)
    ints = np.array([15, 25, -35, 123], np.int32)
    np.testing.assert_array_equal(np.asarray(enp.round(ints, decimals)), np.round(ints, decimals))


def test_special_values():
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(enp.signbit(x)), np.signbit(x))
    np.testing.assert_array_equal(np.asarray(ember.jit(enp.signbit)(x)), np.signbit(x))
    np.testing.assert_array_equal(np.asarray(enp.copysign(2.0, x)), np.copysign(2.0, x))
    np.testing.assert_array_equal(np.asarray(enp.isposinf(x)), np.isposinf(x))
    np.testing.assert_array_equal(np.asarray(enp.isneginf(x)), np.isneginf(x))
    np.testing.assert_array_equal(np.asarray(enp.nan_to_num(x)), np.nan_to_num(x))
    np.testing.assert_array_equal(np.asarray(enp.nan_to_num(x, nan=1.0, posinf=2.0)),
                                  np.nan_to_num(x, nan=1.0, posinf=2.0))
    assert float(enp.logaddexp(-np.inf, -np.inf)) == -np.inf
    assert float(enp.logaddexp(np.inf, np.inf)) == np.inf
    assert float(enp.logaddexp(1000.0, 1000.0)) == pytest.approx(1000 + math.log(2))
    assert float(enp.hypot(3e30, 4e30)) == pytest.approx(5e30, rel=1e-6)
    assert float(enp.hypot(np.inf, np.nan)) == np.inf
    assert float(enp.fmax(np.nan, 1.0)) == 1.0 and np.isnan(float(enp.maximum(np.nan, 1.0)))
    assert enp.nextafter(np.float32(1), np.float32(2)) == np.nextafter(np.float32(1),
                                                                        np.float32(2))


def test_fmax_and_fmin_differentiate_as_jax():
    """JAX's fmax is where(x1 > x2 or x2 is NaN, x1, x2): at a tie the slope goes to x2
    alone (fmax(x, 0) has slope 0 at 0, where maximum's splits it in halves), and a NaN
    operand gets none."""
    x = np.array([-1.0, -0.0, 0.0, 1.0, np.nan], np.float32)
    for fn, numpy_fn, slope in [(enp.fmax, np.fmax, [0, 0, 0, 1, 0]),
                                (enp.fmin, np.fmin, [1, 0, 0, 0, 0])]:
        got = ember.vmap(ember.grad(lambda x: fn(x, np.float32(0.0))))(x)
        np.testing.assert_array_equal(np.asarray(got), slope)
        np.testing.assert_array_equal(np.asarray(fn(x, np.float32(0.0))),
                                      numpy_fn(x, np.float32(0.0)))
    dx, dy = ember.grad(enp.fmax, argnums=(0, 1))(np.float32(1.0), np.float32(1.0))
    assert (float(dx), float(dy)) == (0.0, 1.0)


def test_isclose_and_allclose():
    a = np.array([1.0, np.inf, -np.inf, np.nan, 1e-9, 100.0], np.float32)
    b = np.array([1.0 + 1e-6, np.inf, np.inf, np.nan, 0.0, 100.01], np.float32)
    np.testing.assert_array_equal(np.asarray(enp.isclose(a, b)), np.isclose(a, b))
    np.testing.assert_array_equal(np.asarray(enp.isclose(a, b, equal_nan=True)),
                                  np.isclose(a, b, equal_nan=True))
    np.testing.assert_array_equal(np.asarray(enp.isclose(a, b, rtol=1e-3, atol=0)),
                                  np.isclose(a, b, rtol=1e-3, atol=0))
    assert bool(enp.allclose([1, 2], [1, 2.0000001]))
    assert not bool(enp.allclose(a, b))


@given(shape=SHAPES, seed=SEEDS)
def test_clip_and_where(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(enp.clip(x, -0.5, 0.5)), np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(np.asarray(enp.clip(x, max=0.1)), np.clip(x, None, 0.1))
    np.testing.assert_array_equal(np.asarray(x.clip(-1)), np.clip(x, -1, None))
    cond = x > 0
    np.testing.assert_array_equal(np.asarray(enp.where(cond, x, 0)), np.where(cond, x, 0))
    np.testing.assert_array_equal(np.asarray(enp.where(cond, 1, -1.5)), np.where(cond, 1, -1.5))
    assert enp.where(cond, 1, 2).dtype == np.int32


def test_operators_and_reflected_operators():
    x = enp.asarray([1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(2 - x), [1, 0, -1])
    np.testing.assert_allclose(np.asarray(1 / x), [1, 0.5, 1 / 3])
    np.testing.assert_allclose(np.asarray(2 ** x), [2, 4, 8])
    np.testing.assert_array_equal(np.asarray(-x), [-1, -2, -3])
    assert ((x > 1) & (x < 3)).tolist() == [False, True, False]
    assert (~enp.asarray([True, False])).tolist() == [False, True]
    assert (enp.asarray([5]) >> 1).tolist() == [2] and (1 << enp.asarray([3])).tolist() == [8]
    assert (abs(enp.asarray([-2])) == 2).tolist() == [True]


def test_bool_arithmetic_is_logic_as_numpy():
    t, f = enp.asarray([True, True]), enp.asarray([True, False])
    assert enp.add(t, f).tolist() == [True, True] and enp.add(t, f).dtype == np.bool_
    assert enp.multiply(t, f).tolist() == [True, False]


def test_complex_functions():
    z = np.array([1 + 2j, -3 - 0.5j], np.complex64)
    _close(enp.abs(z), np.abs(z.astype(np.complex128)))
    _close(enp.angle(z), np.angle(z))
    _close(enp.angle(z, deg=True), np.angle(z, deg=True), rtol=1e-5)
    _close(enp.real(z), z.real)
    _close(enp.imag(z), z.imag)
    _close(enp.exp(z), np.exp(z.astype(np.complex128)), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(enp.conj(z)), np.conj(z))
    w = np.array([1.25 + 2.75j, -0.5 - 1.5j], np.complex64)
    np.testing.assert_array_equal(np.asarray(enp.round(w)), np.round(w))
    np.testing.assert_allclose(np.asarray(enp.round(w, 1)), np.round(w, 1))


def test_errors_name_shapes_and_dtypes():
    with pytest.raises(EmberValueError, match=r"shapes \(2,\) and \(3,\) cannot be broadcast"):
        enp.add(np.ones(2), np.ones(3))
    with pytest.raises(EmberTypeError, match="floor_divide is not defined for complex"):
        enp.floor_divide(np.ones(2, np.complex64), 1)
    with pytest.raises(EmberTypeError, match="sign is not defined for bool"):
        enp.sign(np.array([True]))
    with pytest.raises(EmberValueError, match="where takes one argument or three"):
        enp.where(np.ones(2), 1)
    with pytest.raises(EmberValueError, match="round.out=.... is not supported"):
        enp.round(np.ones(2), out=np.ones(2))
    with pytest.raises(EmberTypeError, match="dtype <U3 is not supported by Ember"):
        enp.sin("abc")


def test_elementwise_under_jit_matches_eager():
    def f(x, y):
        return (enp.floor_divide(x, y), enp.remainder(x, y), enp.hypot(x, y),
                enp.logaddexp(x, y), enp.round(x, 1), enp.clip(x, -1, 1),
                enp.where(x > y, x, y), enp.isclose(x, y), enp.copysign(x, y), enp.sinc(x))

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    y = rng.normal(size=(4,)).astype(np.float32)
    with ember.config.override(backend="reference"):
        for eager, jitted in zip(f(x, y), ember.jit(f)(x, y)):
            np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))


def test_array_equal_equiv_iscomplex_isreal_match_numpy():
    nan = np.array([1.0, np.nan], np.float32)
    for a, b in (([1, 2], [1, 2]), ([1, 2], [1, 3]), ([1, 2], [[1, 2], [1, 2]]), (nan, nan),
                 ([1, 2], [1, 2, 3]), (np.ones((2, 1)), np.ones((1, 3)))):
        assert bool(enp.array_equal(a, b)) == np.array_equal(a, b)
        assert bool(enp.array_equiv(a, b)) == np.array_equiv(a, b)
    assert bool(enp.array_equal(nan, nan, equal_nan=True))
    z = np.array([1 + 1j, 2, 3j, 0], np.complex64)
    for name in ("iscomplex", "isreal"):
        for value in (z, z.real):
            np.testing.assert_array_equal(np.asarray(getattr(enp, name)(value)),
                                          getattr(np, name)(value))
