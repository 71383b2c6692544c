"""apply_along_axis, apply_over_axes, piecewise and fromfunction against NumPy and
JAX, under jit and grad; their errors."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), data=st.data())
def test_apply_along_axis_matches_numpy(shape, data):
    x = np.random.default_rng(sum(shape)).normal(size=shape).astype(np.float32)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    _same(enp.apply_along_axis(lambda r: r.max() - r.min(), axis, x),
          np.apply_along_axis(lambda r: r.max() - r.min(), axis, x))
    _same(enp.apply_along_axis(lambda r, k: enp.outer(r[:1], r) * k, axis, x, 3.0),
          np.apply_along_axis(lambda r, k: np.outer(r[:1], r) * k, axis, x, 3.0))


def test_apply_over_axes_matches_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _same(enp.apply_over_axes(enp.sum, x, [0, 2]), np.apply_over_axes(np.sum, x, [0, 2]))
    _same(enp.apply_over_axes(lambda a, axis: enp.cumsum(a, axis), x, 1),
          np.apply_over_axes(lambda a, axis: np.cumsum(a, axis), x, 1))
    with pytest.raises(EmberValueError, match=r"keep the dimensions or drop the axis, got shape "
                                              r"\(\) from shape \(2, 3, 4\)"):
        enp.apply_over_axes(lambda a, axis: a.sum(), x, 0)


def test_piecewise_matches_numpy():
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    cases = [([x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2]),
             ([x < -1, x > 1], [1, lambda v: 2 * v, 7]),  # the extra one is "otherwise"
             ([x < 1, x > -1], [lambda v: v, lambda v: 10 * v]),  # overlap: the last wins
             (x > 0, [lambda v: v + 1])]  # one condition as an array
    for conditions, functions in cases:
        _same(enp.piecewise(x, conditions, functions), np.piecewise(x, conditions, functions))
    ints = np.arange(-3, 4, dtype=np.int32)
    out = enp.piecewise(ints, [ints < 0], [lambda v: v / 2, 0.7])
    assert out.dtype == np.int32  # x's dtype, as NumPy
    _same(out, np.piecewise(ints, [ints < 0], [lambda v: v / 2, 0.7]))


def test_piecewise_and_apply_along_axis_under_jit_and_grad_match_jax():
    jax = pytest.importorskip("jax")
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    m = x.reshape(1, 7) * np.array([[1.0], [2.0]], np.float32)

    def loss(module):
        def f(v, w):
            pieces = module.piecewise(v, [v < 0, v > 1], [lambda t: t ** 2, lambda t: 3 * t,
                                                          lambda t: t])
            rows = module.apply_along_axis(lambda r: (r * r).sum(), 1, w)
            return pieces.sum() + rows.sum()
        return f

    with ember.config.override(backend="reference"):
        ours = ember.jit(ember.grad(loss(enp), (0, 1)))(x, m)
    theirs = jax.grad(loss(jax.numpy), (0, 1))(x, m)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_fromfunction_matches_numpy():
    _same(enp.fromfunction(lambda i, j: i + 2 * j, (2, 3)),
          np.fromfunction(lambda i, j: i + 2 * j, (2, 3)))
    out = enp.fromfunction(lambda i, j: i * j, (3, 3), dtype=int)
    assert out.dtype == np.int32
    _same(out, np.fromfunction(lambda i, j: i * j, (3, 3), dtype=int))


def test_errors():
    with pytest.raises(EmberTypeError, match="apply_along_axis needs a function, got ndarray"):
        enp.apply_along_axis(np.ones(3), 0, np.ones(3))
    with pytest.raises(EmberValueError, match="2 conditions need 2 or 3 functions, got 1"):
        enp.piecewise(np.ones(3), [np.ones(3, bool), np.ones(3, bool)], [1])
    with pytest.raises(EmberValueError, match=r"each condition must have the shape of x \(3,\)"):
        enp.piecewise(np.ones(3), [np.ones(4, bool)], [1])
    with pytest.raises(EmberTypeError, match="conditions must be booleans, got float32"):
        enp.piecewise(np.ones(3), [np.ones(3, np.float32)], [1])
    with pytest.raises(EmberIndexError, match="axis 3 is out of bounds"):
        enp.apply_along_axis(np.sum, 3, np.ones((2, 2)))
