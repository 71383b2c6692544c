"""Transformation rules of every elementwise primitive: derivatives against finite
differences (float64, forward and reverse mode, inputs sampled in each function's
smooth domain) and vmap against a Python loop."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember.ops import elementwise as ew
from ember.ops.rules import float0
from ember.test_util import check_grads

SHAPE = (2, 3)


def _uniform(lo, hi):
    return lambda rng: rng.uniform(lo, hi, SHAPE)


def _away_from_zero(lo, hi):
    return lambda rng: rng.uniform(lo, hi, SHAPE) * rng.choice([-1.0, 1.0], SHAPE)


ANY = _uniform(-2.0, 2.0)
POSITIVE = _uniform(0.5, 2.0)
UNIT = _uniform(-0.9, 0.9)
NONZERO = _away_from_zero(0.3, 2.0)

# name -> samplers of its operands (in a domain where it is smooth)
UNARY = {
    "neg": ANY, "exp": ANY, "exp2": ANY, "log": POSITIVE, "log1p": _uniform(-0.5, 2.0),
    "expm1": ANY, "tanh": ANY, "logistic": ANY, "sin": ANY, "cos": ANY,
    "tan": _uniform(-1.2, 1.2), "asin": UNIT, "acos": UNIT, "atan": ANY, "sinh": ANY,
    "cosh": ANY, "asinh": ANY, "acosh": _uniform(1.2, 3.0), "atanh": UNIT,
    "sqrt": POSITIVE, "rsqrt": POSITIVE, "cbrt": NONZERO, "erf": ANY, "erfc": ANY,
    "erf_inv": UNIT, "lgamma": POSITIVE, "digamma": POSITIVE, "abs": NONZERO,
    "square": ANY,
}
BINARY = {
    "add": (ANY, ANY), "sub": (ANY, ANY), "mul": (ANY, ANY), "div": (ANY, NONZERO),
    "pow": (POSITIVE, ANY), "max": (ANY, ANY), "min": (ANY, ANY), "atan2": (NONZERO, NONZERO),
    "rem": (_uniform(4.2, 5.0), _uniform(2.6, 2.9)),
}
# Piecewise constant or integer valued: their derivative is zero where it exists.
ZERO_DERIVATIVE = {"sign": NONZERO, "floor": _uniform(0.1, 0.9), "ceil": _uniform(0.1, 0.9),
                   "round": _uniform(0.1, 0.4), "is_finite": ANY}


def _apply(name):
    prim = ew.ELEMENTWISE[name]
    return lambda *xs: prim.bind(*xs)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients(x64, name):
    x = UNARY[name](np.random.default_rng(0))
    check_grads(_apply(name), (x,), order=2)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradients(x64, name):
    rng = np.random.default_rng(1)
    args = tuple(sample(rng) for sample in BINARY[name])
    check_grads(_apply(name), args, order=2)


@pytest.mark.parametrize("name", sorted(ZERO_DERIVATIVE))
def test_zero_derivative(x64, name):
    x = ZERO_DERIVATIVE[name](np.random.default_rng(2))
    _, tangent = ember.jvp(_apply(name), (x,), (np.ones(SHAPE),))
    if name == "is_finite":  # a bool output: its tangent is float0, as in JAX
        assert np.asarray(tangent).dtype == float0 and np.shape(tangent) == SHAPE
    else:
        assert not np.any(np.asarray(tangent))
        check_grads(_apply(name), (x,), order=1)


@pytest.mark.parametrize("y", [0, 1, 2, 3, -2])
def test_integer_pow_gradients(x64, y):
    x = NONZERO(np.random.default_rng(3))
    check_grads(lambda x: lax.integer_pow(x, y), (x,), order=2)


def test_pow_at_zero_base_and_exponent_has_finite_gradient(x64):
    dx, dy = ember.grad(lambda x, y: lax.pow(x, y), argnums=(0, 1))(np.array(0.0),
                                                                     np.array(0.0))
    assert (float(dx), float(dy)) == (0.0, 0.0)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_pow_with_exponent_one_half_is_c99_pow_not_sqrt(backend):
    """pow(-inf, 0.5) = +inf and pow(-0, 0.5) = +0 (C99, XLA), where sqrt gives NaN and -0:
    NumPy takes a scalar exponent of 0.5 as sqrt, the reference backend must not."""
    x = np.array([-np.inf, -0.0, 0.0, 4.0, -4.0, np.inf], np.float32)
    got = np.asarray(ember.jit(lambda x: enp.power(x, np.float32(0.5)), backend=backend)(x))
    np.testing.assert_array_equal(got, [np.inf, 0.0, 0.0, 2.0, np.nan, np.inf])
    assert not np.signbit(got[1])


def test_max_splits_ties_evenly(x64):
    dx, dy = ember.grad(lambda x, y: lax.max(x, y), argnums=(0, 1))(np.array(1.0),
                                                                     np.array(1.0))
    assert (float(dx), float(dy)) == (0.5, 0.5)


def test_clamp_gradients_with_scalar_and_array_bounds(x64):
    rng = np.random.default_rng(4)
    x = rng.choice([-0.9, -0.2, 0.3, 0.8], SHAPE) + rng.uniform(-0.05, 0.05, SHAPE)
    check_grads(lambda lo, x, hi: lax.clamp(lo, x, hi), (np.array(-0.5), x, np.array(0.5)))
    check_grads(lambda lo, x, hi: lax.clamp(lo, x, hi),
                (np.full(SHAPE, -0.5), x, np.full(SHAPE, 0.5)))


def test_select_n_gradients(x64):
    rng = np.random.default_rng(5)
    which = rng.integers(0, 3, SHAPE).astype(np.int32)
    cases = tuple(rng.standard_normal(SHAPE) for _ in range(3))
    check_grads(lambda *c: lax.select_n(which, *c), cases, order=2)
    check_grads(lambda a, b: lax.select_n(which == 1, a, b), cases[:2])


def test_convert_element_type_gradients(x64):
    x = np.random.default_rng(6).standard_normal(SHAPE)
    check_grads(lambda x: lax.convert_element_type(x, np.float32), (x,), atol=1e-3, rtol=1e-3)
    grad = ember.grad(lambda x: lax.convert_element_type(
        lax.convert_element_type(x, np.int32), np.float64))(np.array(2.5))
    assert float(grad) == 0.0


@pytest.mark.parametrize("name", ["real", "imag", "conj"])
def test_complex_part_gradients(x64, name):
    rng = np.random.default_rng(7)
    z = rng.standard_normal(SHAPE) + 1j * rng.standard_normal(SHAPE)
    check_grads(_apply(name), (z,), order=1)


def test_complex_arithmetic_gradients(x64):
    rng = np.random.default_rng(8)
    z, w = (rng.standard_normal(SHAPE) + 1j * rng.standard_normal(SHAPE) for _ in range(2))
    check_grads(lambda z, w: lax.mul(lax.exp(z), lax.sin(w)), (z, w), order=1)


def test_digamma_derivative_on_both_sides_of_the_reflection(x64):
    x = np.array([[-2.7, -0.3, 0.2], [0.6, 3.0, 11.0]])
    check_grads(lax.digamma, (x,), order=2)


# --- vmap of every elementwise primitive ------------------------------------------------

def _ints(rng):
    return rng.integers(1, 8, SHAPE).astype(np.int32)


def _complex(rng):
    return rng.standard_normal(SHAPE) + 1j * rng.standard_normal(SHAPE)


def _bools(rng):
    return rng.integers(0, 2, SHAPE).astype(bool)


def _full(value):
    return lambda rng: np.full(SHAPE, value)


OTHER_OPERANDS = {
    "not": [_ints], "population_count": [_ints],
    "real": [_complex], "imag": [_complex], "conj": [_complex],
    "integer_pow": [ANY], "convert_element_type": [ANY], "nextafter": [ANY, ANY],
    "bitcast_convert_type": [ANY],
    "select_n": [_bools, ANY, ANY], "clamp": [_full(-0.5), ANY, _full(0.5)],
    **{name: [_ints, _ints] for name in ("and", "or", "xor", "shift_left",
                                          "shift_right_logical", "shift_right_arithmetic")},
    **{name: [ANY, ANY] for name in ("eq", "ne", "lt", "le", "gt", "ge")},
}
WITH_PARAMS = {
    "integer_pow": lambda x: lax.integer_pow(x, 3),
    "convert_element_type": lambda x: lax.convert_element_type(x, np.int32),
    "bitcast_convert_type": lambda x: lax.bitcast_convert_type(x, np.uint64),
    "round": lambda x: lax.round(x),
}


def _samplers(name):
    if name in BINARY:
        return list(BINARY[name])
    single = UNARY.get(name) or ZERO_DERIVATIVE.get(name)
    return [single] if single else OTHER_OPERANDS[name]


def _fun(name):
    return WITH_PARAMS.get(name) or _apply(name)


def test_every_elementwise_primitive_has_vmap_operands():
    assert {n for n in ew.ELEMENTWISE if not _samplers(n)} == set()


@pytest.mark.parametrize("name", sorted(ew.ELEMENTWISE))
def test_vmap_matches_loop(x64, name):
    rng = np.random.default_rng(9)
    args = [sample(rng) for sample in _samplers(name)]
    fun = _fun(name)
    # The first operand is mapped along its axis 1, the middle ones along axis 0, and the
    # last one (when there are several) is not mapped: it is shared by every element.
    shared = args[-1][0] if len(args) > 1 else None
    mapped = args[:-1] if len(args) > 1 else args
    in_axes = (1, *[0] * (len(mapped) - 1)) + ((None,) if len(args) > 1 else ())
    operands = [np.moveaxis(mapped[0], 0, 1), *mapped[1:]] + ([shared] if len(args) > 1 else [])
    out = ember.vmap(fun, in_axes=in_axes)(*operands)
    expected = np.stack([np.asarray(fun(*[m[i] for m in mapped],
                                        *([shared] if len(args) > 1 else [])))
                         for i in range(SHAPE[0])])
    assert np.asarray(out).dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12, atol=0)


def test_scalar_fallbacks_without_scipy_are_plain_float_math():
    """The SciPy-free reference of erf_inv is per-element Python math: it must stay plain
    floats (this module shadows abs/max with lax ops) and converge to double precision."""
    import math

    from ember.ops.elementwise import _digamma_scalar, _erf_inv_scalar

    for y in np.linspace(-0.999999, 0.999999, 401):
        x = _erf_inv_scalar(float(y))
        assert type(x) is float and abs(math.erf(x) - y) <= 4e-16
    assert type(_digamma_scalar(2.5)) is float
