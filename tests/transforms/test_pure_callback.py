"""``ember.pure_callback``: host Python inside programs, under jit and vmap as in JAX."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.special

import ember
import ember.numpy as jnp
from tests.conftest import BACKENDS


def _bessel(x):
    """A function Ember does not have, computed by SciPy on the host."""
    return ember.pure_callback(lambda v: scipy.special.j0(v).astype(v.dtype),
                               ember.ShapeDtypeStruct(x.shape, x.dtype), x,
                               vmap_method="sequential")


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_under_jit(backend):
    x = np.linspace(0.0, 5.0, 7, dtype=np.float32)
    f = ember.jit(lambda x: _bessel(x) * 2.0 + 1.0, backend=backend)
    np.testing.assert_allclose(np.asarray(f(x)), scipy.special.j0(x) * 2.0 + 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(_bessel(jnp.asarray(x))), scipy.special.j0(x),
                               rtol=1e-6)


def test_pytree_results_and_kwargs():
    def stats(x, *, axis):
        return {"mean": np.mean(x, axis), "max": np.max(x, axis)}

    def f(x):
        shape = ember.ShapeDtypeStruct((x.shape[0],), x.dtype)
        return ember.pure_callback(stats, {"mean": shape, "max": shape}, x, axis=1)

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    out = ember.jit(f)(x)
    np.testing.assert_allclose(np.asarray(out["mean"]), [1.0, 4.0])
    np.testing.assert_allclose(np.asarray(out["max"]), [2.0, 5.0])


def test_unused_result_is_not_computed():
    calls = []

    def f(x):
        ember.pure_callback(lambda v: calls.append(1) or v,
                            ember.ShapeDtypeStruct((), np.float32), x)
        return x + 1.0

    assert float(ember.jit(f)(jnp.asarray(1.0))) == 2.0
    assert calls == []  # pure: dead code, as in JAX


def _shape_logger(method):
    shapes = []

    def callback(x, y):
        shapes.append((np.shape(x), np.shape(y)))
        return x + y

    def fun(x, y):
        out = ember.ShapeDtypeStruct(np.broadcast_shapes(np.shape(x), np.shape(y)), np.float32)
        return ember.pure_callback(callback, out, x, y, vmap_method=method)

    return fun, shapes


@pytest.mark.parametrize("method, expected", [
    ("sequential", [((), ())] * 4),
    ("expand_dims", [((4,), (1,))]),
    ("broadcast_all", [((4,), (4,))]),
])
def test_vmap_methods_as_jax_documents(method, expected):
    fun, shapes = _shape_logger(method)
    out = ember.vmap(fun, in_axes=(0, None))(jnp.arange(4.0), jnp.asarray(1.0))
    np.testing.assert_allclose(np.asarray(out), [1.0, 2.0, 3.0, 4.0])
    assert shapes == expected
    shapes.clear()
    out = ember.jit(ember.vmap(fun, in_axes=(0, None)))(jnp.arange(4.0), jnp.asarray(1.0))
    np.testing.assert_allclose(np.asarray(out), [1.0, 2.0, 3.0, 4.0])
    assert shapes == expected


def test_vmap_batch_axis_not_leading_and_nested():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    out = ember.vmap(_bessel, in_axes=1)(x)
    np.testing.assert_allclose(np.asarray(out), scipy.special.j0(x.T), rtol=1e-6)
    out = ember.jit(ember.vmap(ember.vmap(_bessel)))(x)
    np.testing.assert_allclose(np.asarray(out), scipy.special.j0(x), rtol=1e-6)


def test_vmap_without_method_is_an_error():
    fun = lambda x: ember.pure_callback(np.sin, ember.ShapeDtypeStruct((), np.float32), x)  # noqa: E731
    with pytest.raises(NotImplementedError, match="vmap_method"):
        ember.vmap(fun)(jnp.arange(3.0))
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        ember.pure_callback(np.sin, ember.ShapeDtypeStruct((), np.float32), 1.0,
                            vmap_method="vectorized")


def test_wrong_result_shape_names_both():
    fun = lambda x: ember.pure_callback(lambda v: v[:2], ember.ShapeDtypeStruct((3,), np.float32), x)  # noqa: E731
    with pytest.raises(ValueError, match=r"shape \(2,\) where result_shape_dtypes declares \(3,\)"):
        ember.jit(fun)(jnp.arange(3.0))


def test_grad_needs_custom_rule_and_works_with_one(x64):
    with pytest.raises(ValueError, match="custom_jvp"):
        ember.grad(lambda x: _bessel(x).sum())(jnp.arange(3.0))

    @ember.custom_jvp
    def j0(x):
        return _bessel(x)

    @j0.defjvp
    def j0_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        j1 = ember.pure_callback(lambda v: scipy.special.j1(v).astype(v.dtype),
                                 ember.ShapeDtypeStruct(x.shape, x.dtype), x)
        return j0(x), -j1 * t

    x = np.array([0.5, 1.5, 3.0])
    grad = ember.jit(ember.grad(lambda x: j0(x).sum()))(x)
    eps = 1e-6
    numeric = (scipy.special.j0(x + eps) - scipy.special.j0(x - eps)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(grad), numeric, rtol=1e-7)


def test_matches_jax():
    jax = pytest.importorskip("jax")

    def fun(api, x, y, method):
        out = api.ShapeDtypeStruct(np.broadcast_shapes(np.shape(x), np.shape(y)), np.float32)
        return api.pure_callback(lambda a, b: np.asarray(a) * np.asarray(b) + 1, out, x, y,
                                 vmap_method=method)

    x, y = np.arange(4.0, dtype=np.float32), np.float32(3.0)
    for method in ("sequential", "expand_dims", "broadcast_all"):
        ours = ember.jit(ember.vmap(functools.partial(fun, ember, method=method),
                                    in_axes=(0, None)))(x, y)
        theirs = jax.jit(jax.vmap(functools.partial(fun, jax, method=method),
                                  in_axes=(0, None)))(x, y)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
