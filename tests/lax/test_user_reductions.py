"""lax.reduce and lax.reduce_window: against a NumPy loop, against JAX where installed,
numerical gradients, vmap and jit."""
import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.errors import EmberTypeError, EmberValueError
from ember.test_util import check_grads, check_vmap

RNG = np.random.default_rng(0)


def numpy_reduce_window(x, init, ufunc, window, strides, padding, base, dilation):
    """Windows read one by one from the dilated, padded operand (padding is ``init``)."""
    spread_shape = [(s - 1) * b + 1 for s, b in zip(x.shape, base)]
    spread = np.full(spread_shape, init, x.dtype)
    spread[tuple(np.s_[::b] for b in base)] = x
    padded = np.pad(spread, padding, constant_values=init)
    spans = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
    out_shape = [(p - s) // st + 1 for p, s, st in zip(padded.shape, spans, strides)]
    out = np.empty(out_shape, x.dtype)
    for index in itertools.product(*map(range, out_shape)):
        region = padded[tuple(np.s_[i * st:i * st + s:d] for i, st, s, d
                              in zip(index, strides, spans, dilation))]
        out[index] = ufunc.reduce(region, axis=None, initial=init)
    return out


WINDOW_CASES = [  # window, strides, explicit padding, base dilation, window dilation
    ((1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4, (1,) * 4, (1,) * 4),
    ((1, 3, 3, 1), (1, 1, 2, 1), ((0, 0), (1, 1), (2, 0), (0, 0)), (1,) * 4, (1,) * 4),
    ((2, 2, 1, 2), (1, 1, 1, 1), ((0, 1), (0, 0), (0, 0), (1, 0)), (1, 2, 1, 1),
     (1, 1, 1, 1)),
    ((1, 2, 3, 1), (1, 2, 1, 1), ((0, 0), (0, 0), (1, 2), (0, 0)), (1, 1, 1, 1),
     (1, 2, 2, 1)),
]
COMPUTATIONS = [(lax.max, np.maximum, -np.inf), (lax.min, np.minimum, np.inf),
                (lax.add, np.add, 0.0), (lax.mul, np.multiply, 1.0)]


@pytest.mark.parametrize("case", WINDOW_CASES)
@pytest.mark.parametrize("computation,ufunc,init", COMPUTATIONS)
def test_reduce_window_matches_numpy(case, computation, ufunc, init):
    x = RNG.standard_normal((2, 5, 6, 3)).astype(np.float32)
    window, strides, padding, base, dilation = case
    out = lax.reduce_window(x, init, computation, window, strides, padding, base, dilation)
    expected = numpy_reduce_window(x, init, ufunc, window, strides, padding, base, dilation)
    assert out.shape == expected.shape and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-6)


def test_reduce_window_with_a_lambda_and_integers():
    x = RNG.integers(-9, 9, (7, 5)).astype(np.int32)
    out = lax.reduce_window(x, np.int32(0), lambda a, b: a + b, (3, 2), (2, 1), "VALID")
    expected = numpy_reduce_window(x, 0, np.add, (3, 2), (2, 1), ((0, 0),) * 2, (1, 1), (1, 1))
    np.testing.assert_array_equal(np.asarray(out), expected)
    assert out.dtype == np.int32


def test_integer_max_pooling_with_minus_infinity():
    x = RNG.integers(-9, 9, (4, 6)).astype(np.int32)
    out = lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")
    np.testing.assert_array_equal(np.asarray(out), x.reshape(2, 2, 3, 2).max((1, 3)))


def test_reduce_window_over_a_pair_of_operands():
    """A pytree of operands: the window's maximum and the position where it is."""
    x = RNG.standard_normal(9).astype(np.float32)
    positions = np.arange(9, dtype=np.int32)

    def larger(a, b):
        take_a = a[0] >= b[0]
        return jnp.where(take_a, a[0], b[0]), jnp.where(take_a, a[1], b[1])

    values, where = lax.reduce_window((x, positions), (-np.inf, np.int32(-1)), larger,
                                      (3,), (3,))
    np.testing.assert_array_equal(np.asarray(values), x.reshape(3, 3).max(1))
    np.testing.assert_array_equal(np.asarray(where), x.reshape(3, 3).argmax(1) + [0, 3, 6])


@pytest.mark.parametrize("padding", ["VALID", "SAME", "SAME_LOWER"])
def test_reduce_window_padding_strings_match_jax(padding):
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((2, 7, 6, 3)).astype(np.float32)
    for (computation, jax_computation, init), base in itertools.product(
            [(lax.max, jax.lax.max, -np.inf), (lax.add, jax.lax.add, 0.0),
             (lax.add, jax.lax.add, 1.5)], [None, (1, 2, 1, 1)]):
        args = ((1, 3, 2, 1), (1, 2, 2, 1), padding, base, (1, 1, 2, 1))
        out = lax.reduce_window(x, init, computation, *args)
        expected = jax.lax.reduce_window(x, init, jax_computation, *args)
        assert out.shape == expected.shape
        np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-6,
                                   atol=1e-6)


def test_max_pool_gradient_matches_jax():
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)

    def loss(lax_, np_):
        def f(v):
            pooled = lax_.reduce_window(v, -np_.inf, lax_.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                        "VALID")
            return (pooled ** 2).sum()
        return f

    expected = np.asarray(jax.grad(loss(jax.lax, jax.numpy))(x))
    assert np.count_nonzero(expected) == expected.size // 4  # one maximum per window
    np.testing.assert_allclose(np.asarray(ember.grad(loss(lax, jnp))(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(loss(lax, jnp)))(x)), expected,
                               rtol=1e-6)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_pooling_gradient_with_ties_goes_to_the_first_extreme_entry_as_in_jax(padding):
    """ReLU zeros and saturated pixels tie: JAX sends the whole cotangent to the first
    maximum of each window (row-major), and so does Ember."""
    jax = pytest.importorskip("jax")
    x = RNG.integers(0, 3, (2, 6, 5, 2)).astype(np.float32)
    weights = RNG.standard_normal((2, 3, 3, 2)).astype(np.float32)

    def loss(lax_, np_, computation, init):
        def f(v):
            out = lax_.reduce_window(v, init, computation, (1, 2, 2, 1), (1, 2, 2, 1),
                                     padding)
            return (out * weights[:, :out.shape[1], :out.shape[2]]).sum()
        return f

    for ours, theirs, init in [(lax.max, jax.lax.max, -np.inf),
                               (lax.min, jax.lax.min, np.inf)]:
        expected = np.asarray(jax.grad(loss(jax.lax, jax.numpy, theirs, init))(x))
        np.testing.assert_allclose(np.asarray(ember.grad(loss(lax, jnp, ours, init))(x)),
                                   expected, rtol=1e-6)
        np.testing.assert_allclose(
            np.asarray(ember.jit(ember.grad(loss(lax, jnp, ours, init)))(x)), expected,
            rtol=1e-6)


@pytest.mark.parametrize("computation,init", [(lax.max, -np.inf), (lax.add, 0.0),
                                              (lax.min, np.inf)])
def test_reduce_window_gradients_are_numerically_right(x64, computation, init):
    x = RNG.standard_normal((3, 5, 4))
    check_grads(lambda v: lax.reduce_window(v, init, computation, (2, 3, 2), (1, 2, 1),
                                            "SAME", window_dilation=(1, 1, 2)),
                (x,), order=2)


def test_reduce_window_vmaps_and_jits():
    x = RNG.standard_normal((4, 6, 5)).astype(np.float32)

    def pool(v):
        return lax.reduce_window(v, -np.inf, lax.max, (2, 2), (2, 1), "SAME")

    check_vmap(pool, (x,))
    np.testing.assert_array_equal(np.asarray(ember.jit(pool)(x[0])), np.asarray(pool(x[0])))


def test_reduce_window_shape_tuple():
    # axis 1: 7 spread by 2 is 13, padded 15; windows of 3 at stride 2 give 7
    args = ((2, 7, 6, 3), (1, 3, 2, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (0, 1), (0, 0)),
            (1, 2, 1, 1), (1, 1, 2, 1))
    assert lax.reduce_window_shape_tuple(*args) == (2, 7, 3, 3)
    jax = pytest.importorskip("jax")
    assert jax.lax.reduce_window_shape_tuple(*args) == (2, 7, 3, 3)


def test_reduce_window_errors_say_what_to_fix():
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(EmberValueError, match="one entry per operand axis"):
        lax.reduce_window(x, 0.0, lax.add, (2,), (1, 1))
    with pytest.raises(EmberTypeError, match="init value dtype"):
        lax.reduce_window(x, np.int32(0), lax.add, (2, 2))
    with pytest.raises(EmberValueError, match="padding"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), padding="FULL")


# --- reduce -------------------------------------------------------------------------------

@pytest.mark.parametrize("computation,ufunc,init", COMPUTATIONS)
@pytest.mark.parametrize("dimensions", [(0,), (1, 2), (0, 1, 2)])
def test_reduce_matches_numpy(computation, ufunc, init, dimensions):
    x = RNG.uniform(0.5, 1.5, (3, 5, 4)).astype(np.float32)
    expected = ufunc.reduce(x, axis=dimensions)
    for fn in (computation, lambda a, b: computation(a, b)):  # the monoid and the fold
        np.testing.assert_allclose(np.asarray(lax.reduce(x, init, fn, dimensions)), expected,
                                   rtol=1e-5)


def test_reduce_over_an_empty_axis_gives_the_init_value():
    out = lax.reduce(np.zeros((3, 0), np.float32), 0.0, lambda a, b: a + b, (1,))
    np.testing.assert_array_equal(np.asarray(out), np.zeros(3))


def test_reduce_of_several_operands_is_an_argmax():
    x = RNG.standard_normal((4, 7)).astype(np.float32)
    positions = np.broadcast_to(np.arange(7, dtype=np.int32), x.shape)

    def larger(a, b):
        take_a = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
        return jnp.where(take_a, a[0], b[0]), jnp.where(take_a, a[1], b[1])

    values, where = lax.reduce((x, positions), (-np.inf, np.int32(7)), larger, (1,))
    np.testing.assert_array_equal(np.asarray(values), x.max(1))
    np.testing.assert_array_equal(np.asarray(where), x.argmax(1))


def test_reduce_gradient(x64):
    x = RNG.standard_normal((3, 5))
    check_grads(lambda v: lax.reduce(v, 1.0, lambda a, b: a * b, (1,)), (x,), order=2)
    check_grads(lambda v: lax.reduce(v, -np.inf, lax.max, (0,)), (x,))


def test_reduce_matches_jax():
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((3, 5, 2)).astype(np.float32)
    for ours, theirs in [(lax.add, jax.lax.add), (lax.max, jax.lax.max)]:
        np.testing.assert_allclose(np.asarray(lax.reduce(x, 0.0, ours, (0, 2))),
                                   np.asarray(jax.lax.reduce(x, 0.0, theirs, (0, 2))),
                                   rtol=1e-6, atol=1e-6)  # sums may be near zero
