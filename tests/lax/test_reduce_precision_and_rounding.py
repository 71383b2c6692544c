"""``lax.reduce_precision`` (bit-exact against NumPy's float16 and JAX) and
``lax.RoundingMethod``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember import dtypes, lax

FORMATS = [(5, 10), (8, 7), (4, 3), (5, 2), (8, 23), (2, 1), (8, 0), (11, 30)]


def _values():
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(2000) * 10.0 ** rng.integers(-45, 39, 2000)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520, 6e-8, 1e-40, 3.4e38,
               1.0009765625, 1.00048828125, 1.00146484375]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.concatenate([spread, special]).astype(np.float32)


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.all((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b)))


@pytest.mark.parametrize("narrow, bits", [(np.float16, (5, 10)), (dtypes.bfloat16, (8, 7))])
def test_the_formats_of_float16_and_bfloat16_are_their_casts(narrow, bits):
    x = _values()
    with np.errstate(over="ignore"):
        want = x.astype(narrow).astype(np.float32)
    if bits[0] < 8:  # a narrower exponent: the cast keeps subnormals, the format does not
        tiny = np.abs(want) < float(dtypes.finfo(narrow).tiny)
        want[tiny] = np.copysign(0.0, x[tiny])
    for run in (lambda v: lax.reduce_precision(v, *bits),
                ember.jit(lambda v: lax.reduce_precision(v, *bits))):
        assert _bits_equal(run(x), want)
    assert _bits_equal(lax.reduce_precision(x, 8, 23), x)  # float32's own: unchanged


def test_its_tangent_and_cotangent_are_rounded_too():
    """Linear, as JAX's: forward and reverse mode round the derivative the same way."""
    def f(v):
        return (lax.reduce_precision(v, 5, 2) * 1.3).sum()

    ones = np.ones(3, np.float32)
    np.testing.assert_array_equal(np.asarray(ember.grad(f)(ones)), 1.25)  # 1.3, 2 bits
    np.testing.assert_array_equal(np.asarray(ember.jit(ember.grad(f))(ones)), 1.25)
    _, tangent = ember.jvp(lambda v: lax.reduce_precision(v, 5, 2),
                           (ones,), (np.full(3, 1.3, np.float32),))
    np.testing.assert_array_equal(np.asarray(tangent), 1.25)
    np.testing.assert_array_equal(np.asarray(ember.jacfwd(f)(ones)), [np.float32(1.3)] * 3)
    second = ember.grad(lambda v: ember.grad(f)(v).sum())(ones)  # a constant derivative
    np.testing.assert_array_equal(np.asarray(second), 0.0)
    mapped = ember.vmap(ember.grad(lambda v: lax.reduce_precision(v, 5, 2) * 1.3))(ones)
    np.testing.assert_array_equal(np.asarray(mapped), 1.25)
    inside = ember.grad(lambda v: ember.vmap(f)(v).sum())(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(np.asarray(inside), 1.25)  # (a vmap inside the grad)
    with pytest.raises(TypeError, match="floats"):
        lax.reduce_precision(np.ones(2, np.int32), 5, 10)


def test_rounding_method():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)),
                                  [0.0, 2.0, 2.0, -0.0, -2.0])
    np.testing.assert_array_equal(np.asarray(lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)),
                                  [1.0, 2.0, 3.0, -1.0, -3.0])


@pytest.mark.parametrize("exponent_bits, mantissa_bits", FORMATS)
def test_as_jax(exponent_bits, mantissa_bits):
    jax = pytest.importorskip("jax")
    x = _values()
    assert _bits_equal(lax.reduce_precision(x, exponent_bits, mantissa_bits),
                       jax.lax.reduce_precision(x, exponent_bits, mantissa_bits))
    if exponent_bits <= 5:
        with np.errstate(over="ignore"):
            half = x.astype(np.float16)
        ours = np.asarray(lax.reduce_precision(half, exponent_bits, min(mantissa_bits, 10)))
        theirs = np.asarray(jax.lax.reduce_precision(half, exponent_bits,
                                                     min(mantissa_bits, 10)))
        assert np.array_equal(ours.view(np.uint16)[~np.isnan(ours)],
                              theirs.view(np.uint16)[~np.isnan(theirs)])
    bf16 = ember.numpy.asarray(x[:200]).astype(dtypes.bfloat16)
    ours = lax.reduce_precision(bf16, exponent_bits, min(mantissa_bits, 7))
    theirs = jax.lax.reduce_precision(jax.numpy.asarray(x[:200]).astype(jax.numpy.bfloat16),
                                      exponent_bits, min(mantissa_bits, 7))
    np.testing.assert_array_equal(np.asarray(ours).astype(np.float32),
                                  np.asarray(theirs).astype(np.float32))
    assert [m.name for m in lax.RoundingMethod] == [m.name for m in jax.lax.RoundingMethod]


def test_derivatives_as_jax():
    jax = pytest.importorskip("jax")
    x, t = np.linspace(-3, 3, 7, dtype=np.float32), np.full(7, 1.3, np.float32)
    ours = ember.jvp(lambda v: lax.reduce_precision(v, 5, 2), (x,), (t,))[1]
    theirs = jax.jvp(lambda v: jax.lax.reduce_precision(v, 5, 2), (x,), (t,))[1]
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    ours = ember.grad(lambda v: (lax.reduce_precision(v, 5, 2) * t).sum())(x)
    theirs = jax.grad(lambda v: (jax.lax.reduce_precision(v, 5, 2) * t).sum())(x)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
