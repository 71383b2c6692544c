"""ufunc objects: the methods of the built-in ufuncs against NumPy's, frompyfunc against
NumPy's and JAX's, and the generic (scan) methods under jit and grad."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberValueError

BUILTINS = ["add", "subtract", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or",
            "bitwise_xor", "logical_and", "logical_or", "logical_xor", "logaddexp",
            "logaddexp2"]


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_allclose(actual.astype(np.float64), np.asarray(expected, np.float64),
                               rtol=1e-5)


@pytest.mark.parametrize("name", BUILTINS)
@given(x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                    elements=st.integers(0, 9)), data=st.data())
def test_builtin_methods_match_numpy(name, x, data):
    ours, theirs = getattr(enp, name), getattr(np, name)
    if name.startswith("logaddexp"):
        x = x.astype(np.float32)
    assert isinstance(ours, enp.ufunc) and ours.nin == 2 and ours.__name__ == name
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    if x.shape[axis] or theirs.identity is not None:
        _same(ours.reduce(x, axis=axis), theirs.reduce(x, axis=axis))
        _same(ours.reduce(x, axis=axis, keepdims=True), theirs.reduce(x, axis=axis,
                                                                       keepdims=True))
    _same(ours.accumulate(x, axis=axis), theirs.accumulate(x, axis=axis))
    _same(ours.outer(x[..., :2], x[:1]), theirs.outer(x[..., :2], x[:1]))
    if x.shape[0]:
        starts = np.array(data.draw(st.lists(st.integers(0, x.shape[0] - 1), min_size=1,
                                             max_size=4)))
        _same(ours.reduceat(x, starts), theirs.reduceat(x, starts))
    if name in ("add", "subtract", "multiply", "maximum", "minimum"):
        index = np.array([0, 0, x.shape[0] - 1]) if x.shape[0] else np.zeros(0, int)
        expected = x.copy()
        theirs.at(expected, index, 3)
        _same(ours.at(x, index, 3, inplace=False), expected)


def test_reduce_options_match_numpy():
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    mask = x % 3 != 0
    for name in ("add", "multiply", "maximum", "logical_or", "bitwise_xor"):
        values = x.astype(np.int32) if name.startswith("bitwise") else x
        ours, theirs = getattr(enp, name), getattr(np, name)
        _same(ours.reduce(values, axis=None), theirs.reduce(values, axis=None))
        _same(ours.reduce(values, axis=(0, 1), initial=2), theirs.reduce(values, axis=(0, 1),
                                                                          initial=2))
        _same(ours.reduce(values, axis=1, where=mask, initial=1),
              theirs.reduce(values, axis=1, where=mask, initial=1))
    _same(enp.add.reduce(x, axis=0, dtype=np.int32), np.add.reduce(x, axis=0, dtype=np.int32))
    with pytest.raises(EmberValueError, match="max of an empty selection has no identity"):
        enp.maximum.reduce(np.zeros((0, 2)))


def _affine(a, b):
    return a * b + 1


def test_frompyfunc_matches_numpy_and_jax():
    ours = enp.frompyfunc(_affine, 2, 1, identity=0)
    theirs = np.frompyfunc(_affine, 2, 1, identity=0)  # object arrays: compared as floats
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    # Reductions start from the identity (NumPy does so for numeric dtypes, but not for
    # the object arrays of its frompyfunc: hence initial=0 here).
    calls = (("reduce", (x,), {"initial": 0}), ("reduce", (x,), {"axis": 1, "initial": 0}),
             ("accumulate", (x,), {}), ("outer", (x[0], x[1]), {}), ("__call__", (x, 2.0), {}))
    for method, args, kwargs in calls:
        _same(getattr(ours, method)(*args, **kwargs), getattr(theirs, method)(*args, **kwargs))
    index = np.array([1, 1, 2])
    expected = x[0].astype(object)
    theirs.at(expected, index, 2.0)
    _same(ours.at(x[0], index, 2.0, inplace=False), expected)
    no_identity = enp.frompyfunc(lambda a, b: a - 2 * b, 2, 1)  # not associative: in order
    numpy_twin = np.frompyfunc(lambda a, b: a - 2 * b, 2, 1)
    _same(no_identity.reduce(x[0]), numpy_twin.reduce(x[0]))
    _same(no_identity.reduce(x, axis=1, where=x > 2, initial=0.0),
          numpy_twin.reduce(x, axis=1, where=x > 2, initial=0.0))
    with pytest.raises(EmberValueError, match="empty selection needs initial="):
        no_identity.reduce(np.zeros(0, np.float32))
    jnp = pytest.importorskip("jax.numpy")
    jax_twin = jnp.frompyfunc(_affine, 2, 1, identity=0)
    _same(ours.reduce(x), jax_twin.reduce(x))
    for method, args, kwargs in calls:
        _same(getattr(ours, method)(*args, **kwargs), getattr(jax_twin, method)(*args, **kwargs))


def test_generic_methods_under_jit_and_grad():
    scale = enp.frompyfunc(lambda a, b: a * 0.5 + b, 2, 1)
    x = np.array([1.0, 2.0, 4.0], np.float32)
    with ember.config.override(backend="reference"):
        reduced = ember.jit(scale.reduce)(x)
        grad = ember.grad(lambda v: scale.accumulate(v).sum())(x)
    assert float(reduced) == (1.0 * 0.5 + 2.0) * 0.5 + 4.0
    np.testing.assert_allclose(np.asarray(grad), [1.75, 1.5, 1.0])
    with pytest.raises(ConcretizationError, match="reduceat.indices."):
        ember.jit(lambda v, i: enp.add.reduceat(v, i))(x, np.array([0, 1]))


def test_ufunc_errors():
    with pytest.raises(EmberValueError, match="pass inplace=False"):
        enp.add.at(np.zeros(2), [0], 1.0)
    with pytest.raises(EmberValueError, match="negative.reduce needs a ufunc of two inputs"):
        enp.negative.reduce(np.ones(2))
    with pytest.raises(EmberValueError, match="takes b exactly when"):
        enp.negative.at(np.ones(2), [0], 1.0, inplace=False)
    with pytest.raises(EmberValueError, match=r"indices must lie in \[0, 3\)"):
        enp.add.reduceat(np.ones(3), [0, 3])
    _same(enp.negative.at(np.arange(4.0), np.array([1, 1, 2]), inplace=False), [0, 1, -2, 3])
