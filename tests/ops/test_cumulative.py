"""Cumulative reductions against NumPy; errors; jit vs eager."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.test_util import check_grads, check_vmap

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


# --- associative_scan ----------------------------------------------------------------------

@pytest.mark.parametrize("n", range(0, 10))
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_matches_cumsum(n, reverse):
    x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
    out = lax.associative_scan(lax.add, x, reverse=reverse, axis=1)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(lax.cumsum(x, 1, reverse)))


def test_associative_scan_keeps_order_of_a_non_commutative_fn_over_pytrees():
    """Affine maps compose associatively but not commutatively: (a, b) then (c, d) is
    x -> c (a x + b) + d."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 2)), rng.standard_normal((7, 2))

    def compose(first, second):
        return (lax.mul(second[0], first[0]),
                lax.add(lax.mul(second[0], first[1]), second[1]))

    scale, shift = lax.associative_scan(compose, (a, b))
    expected_scale, expected_shift = [a[0]], [b[0]]
    for i in range(1, 7):
        expected_scale.append(a[i] * expected_scale[-1])
        expected_shift.append(a[i] * expected_shift[-1] + b[i])
    np.testing.assert_allclose(np.asarray(scale), expected_scale, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(shift), expected_shift, rtol=1e-5)


def test_associative_scan_errors():
    with pytest.raises(EmberValueError, match=r"different lengths \[2, 3\] along axis 0"):
        lax.associative_scan(lambda p, q: p, (np.zeros(2), np.zeros(3)))
    with pytest.raises(EmberValueError, match="at least one array"):
        lax.associative_scan(lambda p, q: p, ())


# --- transformation rules ------------------------------------------------------------------

X = np.array([[0.3, -1.2, 2.0, 0.7, 1.3], [1.5, 0.0, -0.4, -2.2, 0.6]])


@pytest.mark.parametrize("name", sorted(UFUNCS))
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_gradients(x64, name, reverse, axis):
    check_grads(lambda x: getattr(lax, name)(x, axis, reverse), (X,), order=2)


def test_cumprod_gradient_is_exact_at_zeros(x64):
    x = np.array([1.0, 0.0, 3.0, 2.0])
    grad = ember.grad(lambda v: lax.reduce_sum(lax.cumprod(v), (0,)))(x)
    np.testing.assert_array_equal(np.asarray(grad), [1.0, 10.0, 0.0, 0.0])


def test_cummax_tangent_follows_the_running_maximum(x64):
    x, t = np.array([1.0, 3.0, 2.0, 5.0]), np.array([10.0, 20.0, 30.0, 40.0])
    _, tangent = ember.jvp(lax.cummax, (x,), (t,))
    np.testing.assert_array_equal(np.asarray(tangent), [10.0, 20.0, 20.0, 40.0])


@pytest.mark.parametrize("name", sorted(UFUNCS))
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_matches_loop(name, in_axis):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for axis in (0, 1):
        check_vmap(lambda v: getattr(lax, name)(v, axis, True), (x,), in_axis, rtol=1e-6)


def test_compositions_jit_of_grad_and_vmap_of_grad():
    x = np.array([[1.0, 0.0, 3.0, 2.0], [2.0, 1.0, 1.0, 0.5]], np.float32)
    f = lambda v: lax.reduce_sum(lax.cumprod(v), (0,))  # noqa: E731
    expected = np.array([[1.0, 10.0, 0.0, 0.0], [3.5, 5.0, 3.0, 2.0]], np.float32)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(f))(x[0])), expected[0])
    np.testing.assert_allclose(np.asarray(ember.jit(ember.vmap(ember.grad(f)))(x)), expected)
