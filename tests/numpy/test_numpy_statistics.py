"""Order statistics (quantile, percentile, median and the NaN-skipping variants),
select and interp against NumPy."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError, EmberValueError

METHODS = ["linear", "lower", "higher", "nearest", "midpoint"]


@pytest.mark.parametrize("method", METHODS)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
       seed=st.integers(0, 999), keepdims=st.booleans(), data=st.data())
def test_quantile_matches_numpy(method, shape, seed, keepdims, data):
    x = np.random.default_rng(seed).integers(-5, 5, shape).astype(np.float32)
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                               st.just(tuple(range(len(shape))))))
    levels = st.integers(0, 16).map(lambda i: i / 16)  # exact in float32 too
    q = data.draw(st.one_of(levels, st.lists(levels, min_size=1, max_size=3)))
    out = enp.quantile(x, q, axis, method=method, keepdims=keepdims)
    expected = np.quantile(x.astype(np.float64), q, axis, method=method, keepdims=keepdims)
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", METHODS)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
       seed=st.integers(0, 999), keepdims=st.booleans(), data=st.data())
def test_nanquantile_matches_numpy(method, shape, seed, keepdims, data):
    rng = np.random.default_rng(seed)
    x = rng.integers(-5, 5, shape).astype(np.float32)
    x[rng.uniform(size=shape) < data.draw(st.sampled_from([0.0, 0.3, 1.0]))] = np.nan
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    q = data.draw(st.one_of(st.just(0.25), st.just([0.0, 0.5, 0.75, 1.0])))
    out = enp.nanquantile(x, q, axis, method=method, keepdims=keepdims)
    with warnings.catch_warnings():  # NumPy warns about all-NaN slices
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.nanquantile(x.astype(np.float64), q, axis, method=method,
                                  keepdims=keepdims)
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


def test_nanmedian_nanpercentile_under_jit_and_grad_match_jax():
    x = np.array([[3.0, np.nan, 2.0, 8.0], [np.nan, np.nan, np.nan, np.nan]], np.float32)
    with ember.config.override(backend="reference"):
        median = ember.jit(lambda v: enp.nanmedian(v, axis=1))(x)
        grad = ember.grad(lambda v: enp.nanpercentile(v[0], 40.0))(x)
    np.testing.assert_allclose(np.asarray(median), [3.0, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(np.asarray(enp.nanpercentile(x, [10, 90], axis=1)),
                                   np.nanpercentile(x, [10, 90], axis=1), rtol=1e-6)
    jax = pytest.importorskip("jax")
    expected = jax.grad(lambda v: jax.numpy.nanpercentile(v[0], 40.0))(x)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(expected), rtol=1e-6)


def test_median_percentile_and_nans():
    x = np.array([[3.0, 1.0, 2.0, 8.0], [np.nan, 1.0, 0.0, 2.0]], np.float32)
    np.testing.assert_allclose(np.asarray(enp.median(x[0])), 2.5)
    np.testing.assert_allclose(np.asarray(enp.median(x, axis=1)), np.median(x, axis=1))
    np.testing.assert_allclose(np.asarray(enp.percentile(x[0], [25, 75])),
                               np.percentile(x[0], [25, 75]))
    assert enp.median(np.arange(4)).dtype == np.float32
    with pytest.raises(EmberValueError, match="method must be one of"):
        enp.quantile(x, 0.5, method="cubic")
    with pytest.raises(EmberValueError, match="q must be a scalar or 1-D"):
        enp.quantile(x, [[0.5]])


@given(seed=st.integers(0, 999))
def test_select_and_interp(seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 5, 9).astype(np.float32)
    conditions, choices = [x < 0, x < 2, x > 4], [x, 10 * x, -x]
    np.testing.assert_array_equal(np.asarray(enp.select(conditions, choices, -1.0)),
                                  np.select(conditions, choices, -1.0))
    xp = np.sort(rng.uniform(-1, 4, 5)).astype(np.float32)
    fp = rng.normal(size=5).astype(np.float32)
    np.testing.assert_allclose(np.asarray(enp.interp(x, xp, fp)), np.interp(x, xp, fp),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(enp.interp(x, xp, fp, left=7.0, right=-7.0)),
                               np.interp(x, xp, fp, left=7.0, right=-7.0), rtol=1e-5, atol=1e-5)
    with pytest.raises(EmberValueError, match="2 conditions for 1 choices"):
        enp.select([x > 0, x < 0], [x])
    with pytest.raises(EmberTypeError, match="select takes a sequence of condition arrays"):
        enp.select(True, [x])
    with pytest.raises(EmberValueError, match="interp.period=.... is not supported"):
        enp.interp(x, xp, fp, period=1.0)
