"""bincount, digitize and the histogram family against NumPy (float64 data, so that bin
edges agree exactly) and JAX (float counts, jit with integer bins)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberTypeError, EmberValueError

SPECS_2D = (3, [2, 4], np.array([-2.0, 0.0, 2.0]))  # histogram2d's kinds of bins


def _close(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


@given(x=hnp.arrays(np.int32, st.integers(0, 12), elements=st.integers(0, 6)),
       minlength=st.integers(0, 9))
def test_bincount_matches_numpy(x, minlength):
    np.testing.assert_array_equal(np.asarray(enp.bincount(x, minlength=minlength)),
                                  np.bincount(x, minlength=minlength))
    weights = np.linspace(0, 1, x.size).astype(np.float32)
    np.testing.assert_allclose(np.asarray(enp.bincount(x, weights, minlength)),
                               np.bincount(x, weights, minlength), rtol=1e-6)


def test_bincount_length_under_jit_as_jax():
    x = np.array([0, 1, 1, 5, -1], np.int32)
    with ember.config.override(backend="reference"):
        counts = ember.jit(lambda v: enp.bincount(v, length=3))(x)
    assert counts.tolist() == [2, 2, 0]  # as JAX: -1 counts as 0, 5 is dropped
    with pytest.raises(ConcretizationError, match="bincount without length="):
        ember.jit(enp.bincount)(x)
    with pytest.raises(EmberTypeError, match="1-D integer array, got f32"):
        enp.bincount(np.ones(3, np.float32))
    jnp = pytest.importorskip("jax.numpy")
    assert counts.tolist() == jnp.bincount(x, length=3).tolist()


@given(data=st.data(), right=st.booleans())
def test_digitize_matches_numpy(data, right):
    edges = np.unique(data.draw(hnp.arrays(np.float64, st.integers(1, 5),
                                           elements=st.integers(-4, 4).map(float))))
    if data.draw(st.booleans()):
        edges = edges[::-1]
    x = data.draw(hnp.arrays(np.float64, st.integers(0, 8), elements=st.integers(-5, 5)
                             .map(lambda i: i / 2)))
    np.testing.assert_array_equal(np.asarray(enp.digitize(x, edges, right)),
                                  np.digitize(x, edges, right))


@pytest.mark.parametrize("bins", [1, 4, [-1.0, 0.0, 0.25, 2.0]])
@given(seed=st.integers(0, 999), weighted=st.booleans(), density=st.booleans(),
       limits=st.sampled_from([None, (-1.0, 1.0), (0.5, 0.5)]))
def test_histogram_matches_numpy(bins, seed, weighted, density, limits):
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=30), 1)  # repeated values, some on the edges
    x[:3] = [np.nan, x.max(), x.min()]
    x = x[1:] if limits is None else x  # NumPy needs finite data to find the range
    weights = rng.uniform(size=x.shape) if weighted else None
    limits = None if not isinstance(bins, int) else limits
    with ember.config.override(enable_x64=True):  # float64 edges, as NumPy's
        counts, edges = enp.histogram(x, bins, limits, weights, density)
        bin_edges = enp.histogram_bin_edges(x, bins, limits)
    e_counts, e_edges = np.histogram(x, bins, limits, weights=weights, density=density)
    _close(edges, e_edges)
    _close(counts, e_counts)
    _close(bin_edges, np.histogram_bin_edges(x, bins, limits))


@given(seed=st.integers(0, 999), d=st.integers(1, 3), density=st.booleans())
def test_histogramdd_and_2d_match_numpy(seed, d, density):
    rng = np.random.default_rng(seed)
    points = np.round(rng.normal(size=(25, d)), 1)
    bins = [2, np.array([-1.0, 0.0, 1.5]), 3][:d]
    limits = [None, None, (-0.5, 0.5)][:d]
    with ember.config.override(enable_x64=True):  # float64 edges, as NumPy's
        counts, edges = enp.histogramdd(points, bins, limits, density=density)
        pairs = [enp.histogram2d(points[:, 0], points[:, -1], spec) for spec in SPECS_2D]
    e_counts, e_edges = np.histogramdd(points, bins, limits, density=density)
    _close(counts, e_counts)
    for ours, theirs in zip(edges, e_edges):
        _close(ours, theirs)
    for spec, pair in zip(SPECS_2D, pairs):
        for ours, theirs in zip(pair, np.histogram2d(points[:, 0], points[:, -1], spec)):
            _close(ours, theirs)


def test_histogram_under_jit_and_grad_matches_jax():
    x = np.array([0.5, 1.5, 1.7, 3.0, 3.0, 2.2], np.float32)
    with ember.config.override(backend="reference"):
        counts, edges = ember.jit(lambda v: enp.histogram(v, 4))(x)
        grads = ember.grad(lambda w: enp.histogram(x, 3, weights=w)[0][1])(np.ones(6, np.float32))
    assert counts.dtype == np.float32  # as JAX: sums of weights
    e_counts, e_edges = np.histogram(x, 4)
    np.testing.assert_allclose(np.asarray(counts), e_counts)
    np.testing.assert_allclose(np.asarray(edges), e_edges, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(grads), [0, 1, 1, 0, 0, 0])  # the middle bin
    jax = pytest.importorskip("jax")
    e_grads = jax.grad(lambda w: jax.numpy.histogram(x, 3, weights=w)[0][1])(np.ones(6, np.float32))
    np.testing.assert_array_equal(np.asarray(grads), np.asarray(e_grads))
    np.testing.assert_array_equal(np.asarray(counts), np.asarray(jax.numpy.histogram(x, 4)[0]))


def test_histogram_errors():
    with pytest.raises(EmberValueError, match="bins='auto'"):
        enp.histogram(np.ones(3), "auto")
    with pytest.raises(EmberValueError, match="range max must not be below min"):
        enp.histogram(np.ones(3), 2, (1, 0))
    with pytest.raises(EmberValueError, match=r"weights must have one entry per value \(3\)"):
        enp.histogram(np.ones(3), 2, weights=np.ones(4))
    with pytest.raises(EmberValueError, match=r"bins needs one entry per dimension \(2\)"):
        enp.histogramdd(np.ones((4, 2)), [2, 3, 4])
    with pytest.raises(EmberTypeError, match="complex"):
        enp.histogram(np.ones(3, np.complex64))
