"""NumPy's own functions on Ember arrays, as on JAX arrays.

np.sum(x), np.mean(x, axis=0, keepdims=True), ... call the array's methods with NumPy's
method signatures (out= included); they return Ember arrays, eagerly and under jit, and
give NumPy's values. A NumPy function that needs the values of a traced array
raises TracerArrayConversionError, as JAX does.
"""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.errors import EmberValueError

HOST = np.array([[0.5, -2.0, 3.0], [4.0, 1.5, -6.0]], np.float32)

# (NumPy function, keyword arguments): each dispatches to an array method.
METHOD_CALLS = [
    (np.sum, {}), (np.sum, {"axis": 0, "keepdims": True}), (np.sum, {"axis": 1, "dtype": np.float32}),
    (np.sum, {"initial": 2.0}), (np.mean, {}), (np.mean, {"axis": 1, "keepdims": True}),
    (np.prod, {"axis": 0}), (np.max, {}), (np.max, {"axis": 1, "keepdims": True}),
    (np.amax, {"axis": 0}), (np.min, {"initial": -10.0}), (np.amin, {}),
    (np.std, {}), (np.std, {"ddof": 1, "axis": 0}), (np.var, {"axis": 1, "keepdims": True}),
    (np.argmax, {}), (np.argmax, {"axis": 1}), (np.argmin, {"axis": 0, "keepdims": True}),
    (np.any, {"axis": 0}), (np.all, {}), (np.cumsum, {"axis": 1}), (np.cumprod, {}),
    (np.round, {"decimals": 0}), (np.transpose, {}), (np.squeeze, {}),
    (np.repeat, {"repeats": 2, "axis": 0}),
]


def _call(fn, x, kwargs):
    if fn is np.repeat:
        kwargs = dict(kwargs)
        return fn(x, kwargs.pop("repeats"), **kwargs)
    return fn(x, **kwargs)


@pytest.mark.parametrize("fn,kwargs", METHOD_CALLS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_numpy_function_returns_an_ember_array_with_numpy_values(fn, kwargs):
    got = _call(fn, jnp.asarray(HOST), kwargs)
    want = _call(fn, HOST, kwargs)
    assert isinstance(got, ember.Array), type(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize("fn,kwargs", METHOD_CALLS[:16], ids=lambda v: getattr(v, "__name__", str(v)))
def test_numpy_function_works_on_tracers_under_jit_and_grad(fn, kwargs):
    got = ember.jit(lambda x: _call(fn, x, kwargs))(jnp.asarray(HOST))
    np.testing.assert_allclose(np.asarray(got), _call(fn, HOST, kwargs), rtol=1e-6)


def test_numpy_reductions_are_differentiable():
    grad = ember.grad(lambda x: np.sum(np.mean(x, axis=0) ** 2))(jnp.asarray(HOST))
    np.testing.assert_allclose(np.asarray(grad), np.broadcast_to(HOST.mean(0), HOST.shape), rtol=1e-6)


def test_searchsorted_and_trace_through_numpy():
    sorted_host = np.sort(HOST.ravel())
    got = np.searchsorted(jnp.asarray(sorted_host), 1.0)
    assert int(got) == int(np.searchsorted(sorted_host, 1.0))
    assert float(np.trace(jnp.asarray(HOST))) == pytest.approx(float(np.trace(HOST)))


def test_out_argument_names_the_fix():
    with pytest.raises(EmberValueError, match="use the return value"):
        np.sum(jnp.asarray(HOST), out=np.zeros(()))


def test_the_same_functions_return_arrays_on_jax_too():
    jax_numpy = pytest.importorskip("jax.numpy")
    for fn, kwargs in METHOD_CALLS:
        ours = _call(fn, jnp.asarray(HOST), kwargs)
        theirs = _call(fn, jax_numpy.asarray(HOST), kwargs)
        assert not isinstance(theirs, np.ndarray), fn.__name__
        assert ours.dtype == theirs.dtype, fn.__name__
        if fn is np.sum and "initial" in kwargs:
            continue  # jax 0.10's Array.sum drops initial=; NumPy's value is checked above
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)


def test_numpy_conversion_of_a_tracer_is_jaxs_error():
    from ember.errors import TracerArrayConversionError

    with pytest.raises(TracerArrayConversionError, match="call ember.numpy instead of numpy"):
        ember.jit(lambda x: np.sin(x))(jnp.asarray(HOST))
    assert isinstance(TracerArrayConversionError("x"), TypeError)  # as JAX's
    # np.sum dispatches to the method, so it stays traced; a concrete JVP value converts
    np.testing.assert_allclose(np.asarray(ember.jit(lambda x: np.sum(x))(HOST)), HOST.sum())
    _, tangent = ember.jvp(lambda x: x * float(np.asarray(x).sum()), (HOST,), (np.ones_like(HOST),))
    np.testing.assert_allclose(np.asarray(tangent), np.full_like(HOST, HOST.sum()), rtol=1e-6)
