"""vectorize against NumPy's (elementwise, broadcasting, excluded and keyword arguments)
and JAX's (gufunc signatures, jit, grad); its errors."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError, EmberValueError


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_elementwise_vectorize_broadcasts_as_numpy(shapes):
    rng = np.random.default_rng(len(shapes.result_shape))
    a, b, c = (rng.normal(size=s).astype(np.float32) for s in shapes.input_shapes)
    ours = enp.vectorize(lambda x, y, z: enp.where(x > y, x * z, y - z))
    theirs = np.vectorize(lambda x, y, z: x * z if x > y else y - z)
    _same(ours(a, b, c), theirs(a, b, c))


def test_excluded_none_and_keyword_arguments():
    x = np.arange(4.0, dtype=np.float32)
    power = enp.vectorize(lambda v, p, scale=1.0: scale * v ** p, excluded={1})
    _same(power(x, 2), x ** 2)
    _same(power(x, 2, scale=np.array([[1.0], [-1.0]])), [[1.0], [-1.0]] * x ** 2)
    static_name = enp.vectorize(lambda v, mode: v + 1 if mode == "up" else v - 1,
                                excluded={"mode"})
    _same(static_name(x, mode="up"), x + 1)
    _same(enp.vectorize(lambda v, skip: v * 2)(x, None), 2 * x)  # None passes through
    pair = enp.vectorize(lambda v: (v, -v))(x)
    assert isinstance(pair, tuple) and len(pair) == 2


SIGNATURES = [("(n,m),(m)->(n)", "dot", ((4, 2, 3), (5, 1, 3))), ("(n)->()", "sum", ((5, 1, 3),)),
              ("(n),(n)->(n,n)", "outer", ((5, 1, 3), (1, 3)))]


@pytest.mark.parametrize("signature,fn_name,shapes", SIGNATURES, ids=[s[1] for s in SIGNATURES])
def test_signatures_match_numpy_and_jax(signature, fn_name, shapes):
    rng = np.random.default_rng(0)
    args = [rng.normal(size=s).astype(np.float32) for s in shapes]
    ours = enp.vectorize(getattr(enp, fn_name), signature=signature)(*args)
    _same(ours, np.vectorize(getattr(np, fn_name), signature=signature)(*args))
    jnp = pytest.importorskip("jax.numpy")
    _same(ours, np.asarray(jnp.vectorize(getattr(jnp, fn_name), signature=signature)(*args)))


def test_several_outputs():
    a = np.random.default_rng(1).normal(size=(4, 2, 3)).astype(np.float32)
    split = enp.vectorize(lambda r: (r.min(), r.max()), signature="(n)->(),()")(a)
    _same(split[0], a.min(-1))
    _same(split[1], a.max(-1))


def test_jit_and_grad_through_vectorize():
    normalize = enp.vectorize(lambda r: r / enp.linalg.norm(r), signature="(n)->(n)")
    x = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    with ember.config.override(backend="reference"):
        out = ember.jit(normalize)(x)
        grad = ember.grad(lambda v: normalize(v)[:, 0].sum())(x)
    _same(out, x / np.linalg.norm(x, axis=1, keepdims=True))
    jax = pytest.importorskip("jax")
    expected = jax.grad(lambda v: jax.numpy.vectorize(
        lambda r: r / jax.numpy.linalg.norm(r), signature="(n)->(n)")(v)[:, 0].sum())(x)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_empty_loop_dimensions():
    assert enp.vectorize(lambda v: v + 1)(np.ones((0, 3))).shape == (0, 3)
    _same(enp.vectorize(lambda r: r.sum(), signature="(n)->()")(np.ones((2, 0))), [0.0, 0.0])


def test_errors_name_core_dimensions_and_shapes():
    matvec = enp.vectorize(enp.dot, signature="(n,m),(m)->(n)")
    with pytest.raises(EmberValueError, match=r"core dimension 'm' is 3 in one argument and 4 "
                                              r"in argument 1 \(shape \(5, 4\)\)"):
        matvec(np.ones((2, 3)), np.ones((5, 4)))
    with pytest.raises(EmberValueError, match=r"argument 0 of shape \(3,\) has fewer "
                                              r"dimensions than its core dimensions"):
        matvec(np.ones(3), np.ones(3))
    with pytest.raises(EmberValueError, match="takes 2 arguments, got 1"):
        matvec(np.ones((2, 3)))
    with pytest.raises(EmberValueError, match="names 2 outputs, the function returned 1"):
        enp.vectorize(lambda v: v, signature="()->(),()")(np.ones(2))
    with pytest.raises(EmberValueError, match=r"output of shape \(2,\) does not match its core"):
        enp.vectorize(lambda v: v, signature="(n)->()")(np.ones((3, 2)))
    with pytest.raises(EmberValueError, match="not a gufunc signature"):
        enp.vectorize(abs, signature="(n)->(n")
    with pytest.raises(EmberTypeError, match="vectorize needs a function, got int"):
        enp.vectorize(3)
    with pytest.raises(EmberValueError, match="excluded must hold"):
        enp.vectorize(abs, excluded={-1})


def test_vectorize_errors_name_the_callers_line():
    matvec = enp.vectorize(enp.dot, signature="(n,m),(m)->(n)")
    with pytest.raises(EmberValueError, match=r"test_numpy_vectorize.py:\d+"):
        matvec(np.ones((2, 3)), np.ones(4))
