"""Reductions and argmax/argmin against NumPy; errors; jit vs eager."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.test_util import check_grads, check_vmap

SHAPES = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@st.composite
def array_and_axes(draw, dtype=np.float32, nonempty=False):
    shape = draw(SHAPES.filter(lambda s: not nonempty or 0 not in s))
    axes = draw(st.lists(st.sampled_from(range(len(shape))), unique=True)) if shape else []
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if np.dtype(dtype) == np.bool_:
        x = rng.random(shape) < 0.5
    elif np.issubdtype(dtype, np.integer):
        x = rng.integers(-50 if np.issubdtype(dtype, np.signedinteger) else 0, 50, shape)
    else:
        x = rng.standard_normal(shape)
    return x.astype(dtype), tuple(axes)


def _expected(name, x, axes):
    ufunc, identity = {
        "reduce_sum": (np.add, 0), "reduce_prod": (np.multiply, 1),
        "reduce_max": (np.maximum, -np.inf), "reduce_min": (np.minimum, np.inf),
    }[name]
    return ufunc.reduce(x.astype(np.float64), axis=axes, initial=identity)


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"])
@given(data=array_and_axes())
def test_float_reductions_match_numpy(name, data):
    x, axes = data
    out = getattr(lax, name)(x, axes)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), _expected(name, x, axes), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("name,ufunc", [("reduce_and", np.bitwise_and),
                                        ("reduce_or", np.bitwise_or),
                                        ("reduce_xor", np.bitwise_xor)])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.uint8])
@given(data=st.data())
def test_bitwise_reductions_match_numpy(name, ufunc, dtype, data):
    x, axes = data.draw(array_and_axes(dtype))
    identity = ~np.zeros((), dtype) if ufunc is np.bitwise_and else np.zeros((), dtype)
    out = getattr(lax, name)(x, axes)
    assert out.dtype == dtype
    np.testing.assert_array_equal(np.asarray(out), ufunc.reduce(x, axis=axes, initial=identity))


@given(data=array_and_axes(np.int32))
def test_integer_sum_and_max_keep_dtype(data):
    x, axes = data
    np.testing.assert_array_equal(np.asarray(lax.reduce_sum(x, axes)),
                                  np.add.reduce(x, axis=axes, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(lax.reduce_max(x, axes)),
                                  np.maximum.reduce(x, axis=axes,
                                                    initial=np.iinfo(np.int32).min))


@pytest.mark.parametrize("name,numpy_fn", [("argmax", np.argmax), ("argmin", np.argmin)])
@given(data=array_and_axes(nonempty=True))
def test_argmax_argmin_match_numpy(name, numpy_fn, data):
    x, _ = data
    for axis in range(-x.ndim, x.ndim):
        out = getattr(lax, name)(x, axis, np.int32)
        assert out.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(out), numpy_fn(x, axis=axis))


def test_nan_wins_and_argmax_points_at_first_nan():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [4.0, 5.0, 6.0, -1.0]], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.reduce_max(x, (1,))), [np.nan, 6.0])
    np.testing.assert_array_equal(np.asarray(lax.reduce_min(x, (1,))), [np.nan, -1.0])
    np.testing.assert_array_equal(np.asarray(lax.argmax(x, 1, np.int32)), [1, 2])
    np.testing.assert_array_equal(np.asarray(lax.argmin(x, 1, np.int32)), [1, 3])


def test_empty_reductions_give_the_identity():
    empty = np.zeros((0, 2), np.float32)
    np.testing.assert_array_equal(np.asarray(lax.reduce_max(empty, (0,))), [-np.inf] * 2)
    np.testing.assert_array_equal(np.asarray(lax.reduce_min(empty, (0,))), [np.inf] * 2)
    np.testing.assert_array_equal(np.asarray(lax.reduce_prod(empty, (0,))), [1, 1])
    ints = np.zeros((0,), np.int8)
    assert int(lax.reduce_max(ints, (0,))) == -128
    assert int(lax.reduce_and(np.zeros((0,), np.uint8), (0,))) == 255


def test_half_precision_sum_accumulates_in_float32():
    x = np.full(4096, 1.0, np.float16)  # a float16 running sum would stop at 2048
    out = lax.reduce_sum(x, (0,))
    assert out.dtype == np.float16 and float(out) == 4096.0


def test_empty_axes_and_negative_axes():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert lax.reduce_sum(x, ()) is x
    np.testing.assert_array_equal(np.asarray(lax.reduce_sum(x, (-1,))), [3.0, 12.0])


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_max", "reduce_and"])
def test_jit_matches_eager(name):
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4) % 7
    fn = lambda v: getattr(lax, name)(v, (0, 2))  # noqa: E731
    np.testing.assert_array_equal(np.asarray(ember.jit(fn)(x)), np.asarray(fn(x)))
    arg = lambda v: lax.argmax(v, 1, np.int32)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(ember.jit(arg)(x)), np.asarray(arg(x)))


def test_errors_name_axes_shapes_and_dtypes():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(EmberIndexError, match=r"axis 2 .* rank 2"):
        lax.reduce_sum(x, (2,))
    with pytest.raises(EmberValueError, match="repeated axis"):
        lax.reduce_sum(x, (0, -2))
    with pytest.raises(EmberTypeError, match="reduce_and does not accept dtype float32"):
        lax.reduce_and(x, (0,))
    with pytest.raises(EmberTypeError, match="reduce_sum does not accept dtype bool"):
        lax.reduce_sum(np.zeros(3, bool), (0,))
    with pytest.raises(EmberTypeError, match="complex"):
        lax.reduce_max(np.zeros(3, np.complex64), (0,))
    with pytest.raises(EmberValueError, match=r"argmax of an empty axis.*\(0, 3\)"):
        lax.argmax(np.zeros((0, 3), np.float32), 0, np.int32)
    with pytest.raises(EmberTypeError, match="index_dtype"):
        lax.argmin(x, 0, np.float32)
    with pytest.raises(EmberIndexError, match="axis -3"):
        lax.argmax(x, -3, np.int32)


# --- transformation rules ------------------------------------------------------------------

X = np.array([[0.3, -1.2, 2.0, 0.7], [1.5, 0.1, -0.4, -2.2], [0.9, 1.1, -0.6, 0.2]])


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_gradients(x64, name, axes):
    check_grads(lambda x: getattr(lax, name)(x, axes), (X,), order=2)


def test_prod_gradient_is_exact_at_zeros(x64):
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]])
    grad = ember.grad(lambda v: lax.reduce_sum(lax.reduce_prod(v, (1,)), (0,)))(x)
    np.testing.assert_array_equal(np.asarray(grad), [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]])
    check_grads(lambda v: lax.reduce_prod(v, (1,)), (x,), order=2)


def test_max_gradient_is_shared_between_ties(x64):
    x = np.array([1.0, 3.0, 3.0, -1.0])
    grad = ember.grad(lambda v: lax.reduce_max(v, (0,)))(x)
    np.testing.assert_array_equal(np.asarray(grad), [0.0, 0.5, 0.5, 0.0])


def test_bitwise_and_index_reductions_have_zero_tangents(x64):
    def f(x):
        index = lax.argmax(x, 0, np.int32)
        return lax.mul(lax.reduce_max(x, (0,)), lax.convert_element_type(index, x.dtype))

    check_grads(f, (X,), order=1)
    _, tangent = ember.jvp(lambda x: lax.argmin(x, 1, np.int32), (X,), (X,))
    assert np.asarray(tangent).shape == (3,)


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_max", "reduce_prod", "reduce_or"])
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_matches_loop(name, in_axis):
    x = (np.arange(24).reshape(2, 3, 4) % 5).astype(np.int32)
    for axes in [(0,), (1,), (0, 1)]:
        check_vmap(lambda v: getattr(lax, name)(v, axes), (x,), in_axis)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_index_vmap_matches_loop(name, in_axis):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for axis in (0, 1):
        check_vmap(lambda v: getattr(lax, name)(v, axis, np.int32), (x,), in_axis)


def test_hessian_of_prod_is_the_product_of_the_other_pairs(x64):
    """Staged (jit) on the reference backend: this checks the rules, not code generation."""
    x = np.array([1.0, 0.0, 3.0, 2.0])
    with ember.config.override(backend="reference"):
        hessian = np.asarray(ember.jit(ember.hessian(lambda v: lax.reduce_prod(v, (0,))))(x))
    expected = np.array([[0, 6, 0, 0], [6, 0, 2, 3], [0, 2, 0, 0], [0, 3, 0, 0]], float)
    np.testing.assert_array_equal(hessian, expected)
