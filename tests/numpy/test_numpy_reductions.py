"""Reductions, statistics and running reductions against NumPy."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberIndexError, EmberValueError

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


@st.composite
def array_axis(draw, dtype=np.float32, allow_none=True):
    shape = draw(SHAPES)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if np.issubdtype(dtype, np.integer):
        x = rng.integers(-5 if np.issubdtype(dtype, np.signedinteger) else 0, 6, shape)
    elif dtype == np.bool_:
        x = rng.random(shape) < 0.5
    else:
        x = rng.normal(size=shape)
    axes = draw(st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True, max_size=len(shape)))
    options = [tuple(axes)] + [a - len(shape) for a in axes[:1]] + ([None] if allow_none else [])
    return x.astype(dtype), draw(st.sampled_from(options)), draw(st.booleans())


def _close(actual, expected, rtol=2e-5, atol=2e-5):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


FLOAT_REDUCTIONS = ["sum", "prod", "mean", "max", "min", "amax", "amin", "ptp", "var", "std",
                    "nansum", "nanmean", "nanmax", "nanmin", "nanprod"]


@pytest.mark.parametrize("name", FLOAT_REDUCTIONS)
@given(case=array_axis())
def test_float_reductions_match_numpy(name, case):
    x, axis, keepdims = case
    out = getattr(enp, name)(x, axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims)
    assert out.dtype == np.float32
    _close(out, expected)


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
@given(case=array_axis(), ddof=st.integers(0, 2))
def test_ddof_and_correction(name, case, ddof):
    x, axis, keepdims = case
    count = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
    if count <= ddof:
        return
    expected = getattr(np, name)(x.astype(np.float64), axis=axis, ddof=ddof, keepdims=keepdims)
    _close(getattr(enp, name)(x, axis=axis, ddof=ddof, keepdims=keepdims), expected)
    if not name.startswith("nan"):
        _close(getattr(enp, name)(x, axis=axis, correction=ddof, keepdims=keepdims), expected)


@pytest.mark.parametrize("dtype,expected", [(np.int8, np.int32), (np.uint8, np.uint32),
                                            (np.bool_, np.int32), (np.int32, np.int32),
                                            (np.float16, np.float16)])
def test_sum_dtype_follows_the_array_api(dtype, expected):
    x = np.ones((3, 4), dtype)
    assert enp.sum(x).dtype == expected and enp.prod(x).dtype == expected
    assert int(enp.sum(x)) == 12
    assert enp.sum(x, dtype="float32").dtype == np.float32
    assert enp.cumsum(x).dtype == expected


def test_integer_statistics_are_float():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert enp.mean(x).dtype == np.float32 and float(enp.mean(x)) == 2.5
    _close(enp.var(x, axis=0), np.var(x, axis=0))
    assert enp.max(x).dtype == np.int32 and int(enp.max(x)) == 5


@given(case=array_axis(allow_none=False))
def test_where_and_initial(case):
    x, axis, keepdims = case
    mask = x > 0
    for name in ("sum", "prod", "mean"):
        out = getattr(enp, name)(x, axis=axis, keepdims=keepdims, where=mask)
        with np.errstate(all="ignore"):
            expected = getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims,
                                         where=mask)
        _close(out, expected)
    _close(enp.max(x, axis=axis, where=mask, initial=-10.0, keepdims=keepdims),
           np.max(x, axis=axis, where=mask, initial=-10.0, keepdims=keepdims))
    _close(enp.sum(x, axis=axis, initial=3.0), np.sum(x, axis=axis, initial=3.0))


@pytest.mark.parametrize("name", ["all", "any", "count_nonzero"])
@given(case=array_axis(np.int32))
def test_logical_reductions_and_counts(name, case):
    x, axis, keepdims = case
    expected = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    out = getattr(enp, name)(x, axis=axis, keepdims=keepdims)
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_average():
    x = np.arange(6.0).reshape(2, 3)
    w = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 1.0]])
    _close(enp.average(x), np.average(x))
    _close(enp.average(x, axis=1, weights=w), np.average(x, axis=1, weights=w))
    avg, total = enp.average(x, axis=0, weights=w, returned=True)
    expected_avg, expected_total = np.average(x, axis=0, weights=w, returned=True)
    _close(avg, expected_avg)
    _close(total, expected_total)
    _, count = enp.average(x, axis=1, returned=True)
    _close(count, [3.0, 3.0])


def test_nan_reductions_of_all_nan_slices_are_nan():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]], np.float32)
    assert np.isnan(np.asarray(enp.nanmax(x, axis=1))[0])
    assert float(enp.nanmin(x, axis=1)[1]) == 1.0
    assert float(enp.nansum(x)) == 1.0


def test_reduction_errors():
    with pytest.raises(EmberValueError, match=r"max of an empty selection has no identity: axis "
                                              r"0 of shape \(0, 2\); pass initial="):
        enp.max(np.ones((0, 2)), axis=0)
    with pytest.raises(EmberValueError, match="with where="):
        enp.min(np.ones(2), where=np.array([True, False]))
    with pytest.raises(EmberIndexError, match="axis 3 is out of bounds"):
        enp.sum(np.ones((2, 2)), axis=3)
    with pytest.raises(EmberValueError, match=r"repeated axis in \(0, -2\)"):
        enp.sum(np.ones((2, 2)), axis=(0, -2))
    with pytest.raises(EmberValueError, match="ddof or correction, not both"):
        enp.var(np.ones(3), ddof=1, correction=1)
    with pytest.raises(EmberValueError, match="sum.out=.... is not supported"):
        enp.sum(np.ones(3), out=np.ones(3))


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
@given(case=array_axis())
def test_running_reductions_match_numpy(name, case):
    x, axis, _ = case
    axis = axis if not isinstance(axis, tuple) else (axis[0] if axis else None)
    if axis is not None and x.ndim == 0:
        axis = None
    _close(getattr(enp, name)(x, axis=axis), getattr(np, name)(x.astype(np.float64), axis=axis),
           rtol=1e-4, atol=1e-4)


def test_cumulative_sum_and_prod_array_api():
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    _close(enp.cumulative_sum(x, axis=1), np.cumsum(x, axis=1))
    _close(enp.cumulative_sum(x, axis=0, include_initial=True),
           np.concatenate([np.zeros((1, 3)), np.cumsum(x, axis=0)]))
    _close(enp.cumulative_prod(x[0], include_initial=True), [1, 1, 2, 6])
    with pytest.raises(EmberValueError, match="need axis= for arrays of more than one dimension"):
        enp.cumulative_sum(x)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
       n=st.integers(0, 3), seed=st.integers(0, 99))
def test_diff_matches_numpy(shape, n, seed):
    x = np.random.default_rng(seed).integers(-9, 9, shape).astype(np.int32)
    for axis in range(-x.ndim, x.ndim):
        _close(enp.diff(x, n, axis), np.diff(x, n, axis))
    tail = np.full(x.shape[:-1] + (2,), 5)
    _close(enp.diff(x, prepend=0, append=tail), np.diff(x, prepend=0, append=tail))
    np.testing.assert_array_equal(np.asarray(enp.diff(x > 0)), np.diff(x > 0))


def test_ediff1d():
    x = np.array([1, 4, 9, 16])
    _close(enp.ediff1d(x, to_begin=0, to_end=[7, 8]), np.ediff1d(x, to_begin=0, to_end=[7, 8]))


def test_reductions_under_jit_match_eager():
    def f(x):
        return (enp.sum(x, 0), enp.mean(x, axis=(0, 1), keepdims=True), enp.std(x, ddof=1),
                enp.max(x, 1), enp.all(x > -3), enp.cumsum(x, 1), enp.diff(x, axis=0),
                enp.nanmax(x, 0), enp.var(x, where=x > 0))

    x = np.random.default_rng(1).normal(size=(3, 4, 2)).astype(np.float32)
    with ember.config.override(backend="reference"):
        for eager, jitted in zip(f(x), ember.jit(f)(x)):
            np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))


def test_nonzero_needs_size_under_jit():
    with pytest.raises(ConcretizationError, match="nonzero .or boolean indexing. without size="):
        ember.jit(lambda x: enp.nonzero(x))(np.ones(3))


def test_nan_reductions_take_where_and_initial_as_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4))
    x[0, 1], x[2, :] = np.nan, np.nan
    mask = rng.uniform(size=(3, 4)) > 0.3
    with ember.config.override(enable_x64=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's all-NaN slice warnings
        for name in ("nanmean", "nanvar", "nanstd"):
            np.testing.assert_allclose(np.asarray(getattr(enp, name)(x, axis=1, where=mask)),
                                       getattr(np, name)(x, axis=1, where=mask))
        for name in ("nanmax", "nanmin"):
            np.testing.assert_allclose(np.asarray(getattr(enp, name)(x, 1, initial=0.5)),
                                       getattr(np, name)(x, 1, initial=0.5))
            np.testing.assert_allclose(
                np.asarray(getattr(enp, name)(x, 1, initial=-5.0, where=mask)),
                getattr(np, name)(x, 1, initial=-5.0, where=mask))


def test_var_with_a_given_mean_and_promote_integers():
    x = np.random.default_rng(1).normal(size=(2, 5))
    center = x.mean(axis=1, keepdims=True)
    with ember.config.override(enable_x64=True):
        np.testing.assert_allclose(np.asarray(enp.var(x, axis=1, mean=center)),
                                   np.var(x, axis=1, mean=center))
        np.testing.assert_allclose(np.asarray(enp.std(x, axis=1, mean=center, ddof=1)),
                                   np.std(x, axis=1, mean=center, ddof=1))
    narrow = np.array([100, 100, 100], np.int8)
    assert int(enp.sum(narrow)) == 300
    kept = enp.sum(narrow, promote_integers=False)  # as JAX: int8 arithmetic wraps
    assert kept.dtype == np.int8 and int(kept) == 44
    assert enp.prod(narrow, promote_integers=False).dtype == np.int8
