"""ember.vmap: axes specifications, nesting, and errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def _loop(f, *args, axis=0):
    return np.stack([np.asarray(f(*[np.take(a, i, axis) for a in args]))
                     for i in range(np.shape(args[0])[axis])])


def test_vmap_matches_a_loop():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    f = lambda a, b: jnp.sum(jnp.sin(a) * b) + a  # noqa: E731
    np.testing.assert_allclose(ember.vmap(f)(x, y), _loop(f, x, y), rtol=1e-6)


def test_in_axes_per_argument_with_none_and_pytree_prefixes():
    rng = np.random.default_rng(1)
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    xs = rng.standard_normal((3, 5))  # batch along axis 1

    def f(p, x):
        return jnp.tanh(x @ p["w"] + p["b"])

    out = ember.vmap(f, in_axes=(None, 1))(params, xs)
    expected = np.stack([np.tanh(xs[:, i] @ params["w"] + params["b"]) for i in range(5)])
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    out = ember.vmap(f, in_axes=({"w": None, "b": 0}, 1))(
        {"w": params["w"], "b": np.stack([params["b"]] * 5)}, xs)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_out_axes_and_unbatched_outputs():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    f = lambda x: (x * 2, jnp.float32(1.0))  # noqa: E731
    doubled, const = ember.vmap(f, out_axes=(1, None))(x)
    np.testing.assert_array_equal(doubled, (x * 2).T)
    assert np.shape(const) == ()
    _, broadcast = ember.vmap(f, out_axes=(0, 0))(x)
    np.testing.assert_array_equal(broadcast, np.ones(2, np.float32))


def test_negative_axes_and_axis_size():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(ember.vmap(lambda r: r * 2, in_axes=-1, out_axes=-1)(x),
                                  x * 2)
    out = ember.vmap(lambda: jnp.zeros(2), in_axes=(), axis_size=5)()
    assert np.shape(out) == (5, 2)


def test_nested_vmap_is_an_outer_product():
    a, b = np.arange(3.0, dtype=np.float32), np.arange(4.0, dtype=np.float32)
    out = ember.vmap(ember.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None))(a, b)
    np.testing.assert_array_equal(out, np.outer(a, b))


def test_keyword_arguments_are_mapped_over_axis_0():
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    out = ember.vmap(lambda x, scale: x * scale)(x, scale=np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(out, x * np.array([[1.0], [2.0], [3.0]], np.float32))


def test_inconsistent_sizes_name_each_argument():
    with pytest.raises(ValueError) as info:
        ember.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    message = str(info.value)
    assert "input 0 of shape (3,) has size 3" in message
    assert "input 1 of shape (4,) has size 4" in message


def test_in_axes_structure_must_match_the_arguments():
    with pytest.raises(ValueError, match="in_axes has 1 entries.*2 positional"):
        ember.vmap(lambda a, b: a, in_axes=(0,))(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="tree prefix"):
        ember.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": np.ones(3)})


def test_axis_out_of_range_names_the_shape():
    with pytest.raises(ValueError, match="in_axes 2 is out of range.*shape \\(3, 4\\)"):
        ember.vmap(lambda a: a, in_axes=2)(np.ones((3, 4)))


def test_out_axes_none_for_a_batched_output_is_an_error():
    with pytest.raises(ValueError, match="out_axes is None"):
        ember.vmap(lambda a: a * 2, out_axes=None)(np.ones(3))


def test_no_mapped_argument_needs_axis_size():
    with pytest.raises(ValueError, match="axis_size"):
        ember.vmap(lambda a: a, in_axes=None)(np.ones(3))
