"""ember.nn activations against NumPy formulas, stability at extreme inputs, gradients."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.nn as nn
import ember.numpy as enp
from ember.errors import EmberIndexError, EmberValueError

SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)


def _logsumexp(x, axis=None, keepdims=False, b=None):
    x = np.asarray(x, np.float64)
    top = np.max(x, axis=axis, keepdims=True)
    total = np.sum(np.exp(x - top) * (1 if b is None else b), axis=axis, keepdims=True)
    out = np.log(np.abs(total)) + top
    return (out if keepdims else np.squeeze(out, axis)), np.sign(total)


def _log_softmax(x, axis):
    return x - _logsumexp(x, axis, keepdims=True)[0]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(x, 0)


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805

FORMULAS = [
    ("relu", lambda x: np.maximum(x, 0)),
    ("relu6", lambda x: np.clip(x, 0, 6)),
    ("sigmoid", _sigmoid),
    ("log_sigmoid", lambda x: -_softplus(-x)),
    ("softplus", _softplus),
    ("soft_sign", lambda x: x / (np.abs(x) + 1)),
    ("silu", lambda x: x * _sigmoid(x)),
    ("swish", lambda x: x * _sigmoid(x)),
    ("gelu", lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    ("hard_sigmoid", lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hard_silu", lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hard_tanh", lambda x: np.clip(x, -1, 1)),
    ("elu", _elu),
    ("celu", lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    ("selu", lambda x: SELU_SCALE * _elu(x, SELU_ALPHA)),
    ("leaky_relu", lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("mish", lambda x: x * np.tanh(_softplus(x))),
    ("squareplus", lambda x: (x + np.sqrt(x * x + 4)) / 2),
    ("tanh", np.tanh),
    ("identity", lambda x: x),
]


@pytest.mark.parametrize("name,formula", FORMULAS, ids=[f[0] for f in FORMULAS])
@given(shape=SHAPES, seed=st.integers(0, 999))
def test_pointwise_activations_match_formulas(name, formula, shape, seed):
    x = (np.random.default_rng(seed).normal(size=shape) * 4).astype(np.float32)
    out = getattr(nn, name)(x)
    assert out.dtype == np.float32 and out.shape == shape
    np.testing.assert_allclose(np.asarray(out), formula(x.astype(np.float64)), rtol=2e-5,
                               atol=2e-6)


def test_exact_gelu_and_parameters():
    x = np.linspace(-6, 6, 25).astype(np.float32)
    exact = x * 0.5 * np.vectorize(math.erfc)(-x.astype(np.float64) / np.sqrt(2))
    np.testing.assert_allclose(np.asarray(nn.gelu(x, approximate=False)), exact, rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(np.asarray(nn.elu(x, 0.5)), _elu(x, 0.5), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(nn.celu(x, 2.0)),
                               np.where(x > 0, x, 2 * np.expm1(np.minimum(x, 0) / 2)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.leaky_relu(x, 0.2)), np.where(x >= 0, x, 0.2 * x))


def test_extreme_inputs_stay_finite():
    x = np.array([-1e4, -100.0, 0.0, 100.0, 1e4], np.float32)
    for name in ("sigmoid", "log_sigmoid", "softplus", "silu", "elu", "selu", "celu", "gelu",
                 "mish"):
        assert np.isfinite(np.asarray(getattr(nn, name)(x))).all(), name
    assert float(nn.softplus(np.float32(1e4))) == 1e4
    assert float(nn.log_sigmoid(np.float32(-1e4))) == -1e4
    np.testing.assert_allclose(np.asarray(nn.softmax(np.array([1e4, 1e4 - 1, -1e4]))),
                               [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0],
                               rtol=1e-6)


@given(shape=SHAPES, seed=st.integers(0, 999), data=st.data())
def test_softmax_family_matches_numpy(shape, seed, data):
    x = (np.random.default_rng(seed).normal(size=shape) * 5).astype(np.float32)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    expected_lse = _logsumexp(x, axis)[0]
    np.testing.assert_allclose(np.asarray(nn.softmax(x, axis)), np.exp(_log_softmax(x, axis)),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(nn.log_softmax(x, axis)), _log_softmax(x, axis),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.logsumexp(x, axis)), expected_lse, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.logsumexp(x, axis, keepdims=True)),
                               np.expand_dims(expected_lse, axis), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.logsumexp(x)), _logsumexp(x)[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.standardize(x, axis)),
                               (x - x.mean(axis, keepdims=True))
                               / np.sqrt(x.var(axis, keepdims=True) + 1e-5), rtol=1e-3,
                               atol=1e-3)


def test_logsumexp_weights_signs_and_infinities():
    a = np.array([0.0, 1.0, 2.0], np.float32)
    b = np.array([1.0, -2.0, 0.5], np.float32)
    out, sign = nn.logsumexp(a, b=b, return_sign=True)
    expected, expected_sign = _logsumexp(a, b=b)
    assert float(sign) == expected_sign
    np.testing.assert_allclose(float(out), expected, rtol=1e-6)
    assert math.isnan(float(nn.logsumexp(a, b=-np.ones(3))))
    assert float(nn.logsumexp(np.array([-np.inf, -np.inf]))) == -np.inf
    assert float(nn.logsumexp(np.array([np.inf, 0.0]))) == np.inf


def test_masked_softmax():
    x = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], np.float32)
    mask = np.array([[True, False, True], [True, True, False]])
    out = np.asarray(nn.softmax(x, where=mask))
    np.testing.assert_allclose(out[0], [1 / (1 + np.e ** 2), 0, np.e ** 2 / (1 + np.e ** 2)],
                               rtol=1e-6)
    np.testing.assert_allclose(out[1], [0.5, 0.5, 0.0])
    log_out = np.asarray(nn.log_softmax(x, where=mask))
    assert log_out[0, 1] == -np.inf and np.allclose(np.exp(log_out[1, :2]), 0.5)


def test_one_hot_glu_standardize():
    np.testing.assert_array_equal(np.asarray(nn.one_hot(np.array([0, 2, -1, 3]), 3)),
                                  [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    assert nn.one_hot(np.array([1]), 2, dtype=enp.int32).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(nn.one_hot(np.array([[1, 0]]), 3, axis=0)),
                                  np.eye(3)[[[1, 0]]].transpose(2, 0, 1))
    x = np.arange(8.0, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(np.asarray(nn.glu(x)), x[:, :2] * _sigmoid(x[:, 2:]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.standardize(x, mean=1.0, variance=4.0)),
                               (x - 1) / np.sqrt(4 + 1e-5), rtol=1e-6)
    with pytest.raises(EmberValueError, match=r"glu: axis -1 of shape \(2, 3\) must have an even"):
        nn.glu(np.ones((2, 3)))
    with pytest.raises(EmberIndexError, match=r"axis 3 is out of bounds for an array of 2 "
                                              r"dimensions[^\n]*\n  \(at .*test_activations.py"):
        nn.one_hot(np.array([1]), 3, axis=3)


def test_gradients_are_stable():
    x = np.array([-1e3, -1.0, 0.5, 1e3], np.float32)
    grad_softplus = np.asarray(ember.grad(lambda v: enp.sum(nn.softplus(v)))(x))
    np.testing.assert_allclose(grad_softplus, _sigmoid(x.astype(np.float64)), rtol=1e-6)
    grad_lse = np.asarray(ember.grad(lambda v: nn.logsumexp(v))(x))
    np.testing.assert_allclose(grad_lse, np.exp(_log_softmax(x, 0)), atol=1e-7)
    grad_elu = np.asarray(ember.grad(lambda v: enp.sum(nn.elu(v)))(x))
    assert np.isfinite(grad_elu).all()
    np.testing.assert_allclose(grad_elu, np.where(x > 0, 1.0, np.exp(np.minimum(x, 0))),
                               rtol=1e-6)


def test_relu_and_relu6_derivatives_are_zero_at_their_kinks_as_jax():
    """JAX defines them so (maximum's derivative at a tie is 1/2); NaN gives 0 too."""
    x = np.array([-2.0, -0.0, 0.0, 0.5, 5.5, 6.0, 7.0, np.nan], np.float32)
    relu = np.asarray(ember.vmap(ember.grad(nn.relu))(x))
    relu6 = np.asarray(ember.jit(ember.vmap(ember.grad(nn.relu6)))(x))
    np.testing.assert_array_equal(relu, [0, 0, 0, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(relu6, [0, 0, 0, 1, 1, 0, 0, 0])
    tangent = ember.jvp(nn.relu, (x,), (np.full_like(x, 3.0),))[1]
    np.testing.assert_array_equal(np.asarray(tangent), 3.0 * relu)
    np.testing.assert_array_equal(np.asarray(nn.relu(np.arange(-2, 3))), [0, 0, 0, 1, 2])


def test_hard_tanh_derivative_is_one_at_its_kinks_as_jax():
    """JAX writes it with where, not clip: slope 1 at -1 and 1 (clip's would be 1/2), and
    for NaN (clip's: 0)."""
    x = np.array([-3.0, -1.0, -0.5, 0.0, 1.0, 3.0, np.nan], np.float32)
    slope = np.asarray(ember.vmap(ember.grad(nn.hard_tanh))(x))
    np.testing.assert_array_equal(slope, [0, 1, 1, 1, 1, 0, 1])
    np.testing.assert_array_equal(np.asarray(nn.hard_tanh(x)), [-1, -1, -0.5, 0, 1, 1, np.nan])
    np.testing.assert_array_equal(np.asarray(nn.hard_tanh(np.arange(-2, 3))), [-1, -1, 0, 1, 1])


def test_activations_under_jit_match_eager():
    def f(x):
        return nn.gelu(x), nn.softmax(x, axis=0), nn.logsumexp(x, 1), nn.selu(x), nn.one_hot(
            enp.argmax(x, 1), 4)

    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    with ember.config.override(backend="reference"):
        for eager, jitted in zip(f(x), ember.jit(f)(x)):
            np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0, (0, 1), None])
def test_softmax_derivatives_match_finite_differences(x64, axis):
    """softmax has its own JVP (in terms of its output): forward and reverse mode, up to
    second order, against central differences."""
    from ember.test_util import check_grads

    x = np.random.default_rng(3).normal(size=(3, 4)) * 2
    weights = np.random.default_rng(4).normal(size=(3, 4))
    check_grads(lambda v: nn.softmax(v, axis=axis) * weights, (x,), order=2)


def test_softmax_gradient_of_a_saturated_row_is_finite():
    x = np.array([[1e4, 0.0, -1e4], [0.0, 0.0, 0.0]], np.float32)
    g = np.asarray(ember.grad(lambda v: enp.sum(nn.softmax(v) * np.arange(3.0)))(x))
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g[0], 0.0, atol=1e-6)
    np.testing.assert_allclose(g[1], np.array([-1, 0, 1]) / 3.0, rtol=1e-6)
