"""The parts of jax.lax that JAX programs reach for, against JAX where installed and
against NumPy: signatures, map with batch_size, sort with several operands, top_k along
an axis, dot with dimension numbers and precision, cumlogsumexp, associative_scan,
conv_transpose and the dynamic slices along one axis."""
import inspect

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads, check_vmap

RNG = np.random.default_rng(0)
NAMES = ["reduce_window", "reduce", "conv_general_shape_tuple", "conv_transpose_shape_tuple",
         "padtype_to_pads", "reduce_window_shape_tuple", "conv_transpose",
         "dynamic_slice_in_dim", "dynamic_update_slice_in_dim", "dot", "associative_scan",
         "sort", "sort_key_val", "top_k", "cumlogsumexp", "map", "conv_shape_tuple",
         "conv_general_permutations"]


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_jax(name):
    jax = pytest.importorskip("jax")

    def parameters(fn):  # names, kinds and defaults; sharding arguments are JAX's own
        skip = {"out_sharding"}
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()
                if p.name not in skip]

    ours = parameters(getattr(lax, name))
    assert ours == parameters(getattr(jax.lax, name))


def test_precision_names():
    assert lax.Precision("highest") is lax.Precision.HIGHEST
    assert lax.Precision("tensorfloat32") is lax.Precision.HIGH
    assert lax.Precision("fastest") is lax.Precision.DEFAULT
    assert str(lax.Precision.HIGHEST) == "HIGHEST"
    with pytest.raises(ValueError):
        lax.Precision("HIGH")


def test_dot_with_dimension_numbers_and_precision():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    out = lax.dot(a, b, dimension_numbers=(((2,), (1,)), ((0,), (0,))),
                  precision=lax.Precision.HIGHEST, preferred_element_type=np.float32)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-5)
    m = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(lax.dot(m, m.T, precision="highest")), m @ m.T,
                               rtol=1e-5)
    ints = np.arange(6, dtype=np.int8).reshape(2, 3)
    wide = lax.dot(ints, ints.T, preferred_element_type=np.int32)
    assert wide.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(wide), ints.astype(np.int32) @ ints.T)


@pytest.mark.parametrize("batch_size", [None, 1, 2, 3, 7, 10])
def test_map_with_batch_size(batch_size):
    xs = {"a": RNG.standard_normal((7, 3)).astype(np.float32), "b": np.arange(7)}

    def f(x):
        return {"sum": jnp.sum(x["a"] ** 2) + x["b"], "row": x["a"][::-1]}

    out = lax.map(f, xs, batch_size=batch_size)
    np.testing.assert_allclose(np.asarray(out["sum"]), (xs["a"] ** 2).sum(1) + xs["b"],
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out["row"]), xs["a"][:, ::-1])
    jitted = ember.jit(lambda v: lax.map(f, v, batch_size=batch_size))(xs)
    np.testing.assert_allclose(np.asarray(jitted["sum"]), np.asarray(out["sum"]), rtol=1e-6)


def test_map_with_batch_size_differentiates(x64):
    xs = RNG.standard_normal((5, 2))
    check_grads(lambda v: lax.map(lambda r: jnp.sin(r) * r[0], v, batch_size=2), (xs,),
                order=1)


def test_sort_with_several_operands_matches_jax():
    jax = pytest.importorskip("jax")
    keys = RNG.integers(0, 3, (4, 9)).astype(np.int32)
    second = RNG.integers(0, 3, (4, 9)).astype(np.float32)
    payload = RNG.standard_normal((4, 9)).astype(np.float32)
    for num_keys in (1, 2):
        ours = lax.sort((keys, second, payload), dimension=1, num_keys=num_keys)
        theirs = jax.lax.sort((keys, second, payload), dimension=1, num_keys=num_keys)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    k, v = lax.sort_key_val(payload, keys, dimension=0)
    order = np.argsort(payload, axis=0, kind="stable")
    np.testing.assert_array_equal(np.asarray(k), np.take_along_axis(payload, order, 0))
    np.testing.assert_array_equal(np.asarray(v), np.take_along_axis(keys, order, 0))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_top_k_along_an_axis(axis):
    x = RNG.standard_normal((5, 6, 4)).astype(np.float32)
    values, indices = lax.top_k(x, 3, axis=axis)
    order = np.argsort(-x, axis=axis, kind="stable")
    expected = np.take(order, np.arange(3), axis=axis)
    np.testing.assert_array_equal(np.asarray(indices), expected)
    np.testing.assert_array_equal(np.asarray(values), np.take_along_axis(x, expected, axis))
    jax = pytest.importorskip("jax")
    theirs = jax.lax.top_k(x, 3, axis=axis)
    np.testing.assert_array_equal(np.asarray(values), np.asarray(theirs[0]))
    np.testing.assert_array_equal(np.asarray(indices), np.asarray(theirs[1]))


def test_top_k_along_an_axis_differentiates(x64):
    x = RNG.permutation(24).reshape(4, 6).astype(np.float64)
    check_grads(lambda v: lax.top_k(v, 2, axis=0)[0], (x,), order=1)
    check_vmap(lambda v: lax.top_k(v, 2, axis=0)[0], (x[None].repeat(3, 0),))


def test_cumlogsumexp_and_associative_scan_match_jax():
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    for axis, reverse in [(0, False), (1, True)]:
        np.testing.assert_allclose(
            np.asarray(lax.cumlogsumexp(x, axis=axis, reverse=reverse)),
            np.asarray(jax.lax.cumlogsumexp(x, axis=axis, reverse=reverse)), rtol=1e-6)

    def affine(a, b):  # composition of x -> m x + c maps: associative, not commutative
        return a[0] * b[0], a[1] * b[0] + b[1]

    ms, cs = RNG.uniform(0.5, 1.5, (6,)).astype(np.float32), x[:, 0].repeat(2)[:6]
    ours = lax.associative_scan(affine, (ms, cs), reverse=True)
    theirs = jax.lax.associative_scan(affine, (ms, cs), reverse=True)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)


def test_cumlogsumexp_gradient(x64):
    check_grads(lambda v: lax.cumlogsumexp(v, axis=1), (RNG.standard_normal((3, 5)),),
                order=2)


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((1, 2), (0, 1))])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_jax(padding, transpose_kernel):
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((2, 5, 4, 3)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3) if transpose_kernel else (3, 2, 3, 4)
                            ).astype(np.float32)
    args = ((2, 1), padding)
    kwargs = dict(dimension_numbers=("NHWC", "HWIO", "NHWC"),
                  transpose_kernel=transpose_kernel)
    if transpose_kernel:
        w = w.transpose(0, 1, 3, 2).copy()  # HWIO of the forward conv: I=4 out, O=3 in
    ours = lax.conv_transpose(x, w, *args, **kwargs)
    theirs = jax.lax.conv_transpose(x, w, *args, **kwargs)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("padding", [((0, 0), (1, 1)), ((2, 1), (0, 2))])
def test_conv_transpose_with_consistent_padding_is_the_conv_gradient(padding):
    """With use_consistent_padding, pairs are the forward conv's padding: the transpose
    with transpose_kernel is then the gradient of that conv (stride 1)."""
    x = RNG.standard_normal((1, 6, 5, 2)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 2, 4)).astype(np.float32)
    dims = ("NHWC", "HWIO", "NHWC")

    def forward(v):
        return lax.conv_general_dilated(v, w, (1, 1), padding, dimension_numbers=dims)

    ct = RNG.standard_normal(forward(x).shape).astype(np.float32)
    expected = ember.vjp(forward, x)[1](ct)[0]
    out = lax.conv_transpose(ct, w, (1, 1), padding, dimension_numbers=dims,
                             transpose_kernel=True, use_consistent_padding=True)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-4, atol=1e-5)
    jax = pytest.importorskip("jax")
    theirs = jax.lax.conv_transpose(ct, w, (1, 1), padding, dimension_numbers=dims,
                                    transpose_kernel=True, use_consistent_padding=True)
    np.testing.assert_allclose(np.asarray(out), np.asarray(theirs), rtol=1e-4, atol=1e-5)


def test_dynamic_slices_along_one_axis_match_jax():
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    update = np.ones((5, 2), np.float32)
    for start in (0, 3, 5, -2):
        np.testing.assert_array_equal(
            np.asarray(lax.dynamic_slice_in_dim(x, start, 3, axis=1)),
            np.asarray(jax.lax.dynamic_slice_in_dim(x, start, 3, axis=1)))
        np.testing.assert_array_equal(
            np.asarray(lax.dynamic_update_slice_in_dim(x, update, start, axis=1)),
            np.asarray(jax.lax.dynamic_update_slice_in_dim(x, update, start, axis=1)))
    jitted = ember.jit(lambda v, i: lax.dynamic_slice_in_dim(v, i, 2))(x, np.int32(4))
    np.testing.assert_array_equal(np.asarray(jitted), x[3:5])
