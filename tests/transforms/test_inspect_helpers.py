"""make_jaxpr, eval_shape, ShapeDtypeStruct, jacobian, named_scope / named_call and
ensure_compile_time_eval, as JAX has them."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.test_util import check_grads


def _model(w, x):
    return {"logits": jnp.tanh(x @ w), "norm": (w * w).sum()}


def test_make_jaxpr_text_is_the_graph():
    fn = lambda x: jnp.sin(x) * 2.0  # noqa: E731
    jaxpr = ember.make_jaxpr(fn)(1.0)
    text = str(jaxpr)
    assert text == str(ember.make_graph(fn)(1.0))
    assert "sin" in text and "mul" in text
    assert [e.prim.name for e in jaxpr.eqns] == ["sin", "mul"]
    assert [a.shape for a in jaxpr.in_avals] == [()]
    assert jaxpr.consts == []


def test_make_jaxpr_static_argnums_and_return_shape():
    def power(x, n):
        for _ in range(n):
            x = x * x
        return x

    jaxpr, shape = ember.make_jaxpr(power, static_argnums=1, return_shape=True)(
        np.ones(3, np.float32), 3)
    assert [e.prim.name for e in jaxpr.eqns] == ["mul"] * 3
    assert shape == ember.ShapeDtypeStruct((3,), np.float32)


def test_eval_shape_runs_nothing():
    calls = []

    def spy(w, x):
        calls.append(type(x).__name__)
        return _model(w, x)

    out = ember.eval_shape(spy, ember.ShapeDtypeStruct((4, 2), jnp.float32),
                           np.zeros((8, 4), np.float32))
    assert out == {"logits": ember.ShapeDtypeStruct((8, 2), np.float32),
                   "norm": ember.ShapeDtypeStruct((), np.float32)}
    assert calls == ["GraphTracer"]


def test_shape_dtype_struct_fields_and_lower():
    spec = ember.ShapeDtypeStruct((3, 4), jnp.float32)
    assert (spec.shape, spec.dtype, spec.ndim, spec.size, len(spec)) == (
        (3, 4), np.dtype(np.float32), 2, 12, 3)
    assert spec == ember.ShapeDtypeStruct([3, 4], "float32")
    assert hash(spec) == hash(ember.ShapeDtypeStruct((3, 4), np.float32))
    assert repr(spec) == "ShapeDtypeStruct(shape=(3, 4), dtype=float32)"
    compiled = ember.jit(lambda x: x.sum(0)).lower(spec).compile()
    np.testing.assert_allclose(np.asarray(compiled(np.ones((3, 4), np.float32))), [3.0] * 4)


def test_jacobian_is_reverse_mode_and_checked_numerically(x64):
    fn = lambda x: jnp.sin(x) * x.sum()  # noqa: E731
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(np.asarray(ember.jacobian(fn)(x)),
                               np.asarray(ember.jacfwd(fn)(x)), rtol=1e-12)
    expected = np.diag(np.cos(x) * x.sum()) + np.sin(x)[:, None]
    np.testing.assert_allclose(np.asarray(ember.jacobian(fn)(x)), expected, rtol=1e-12)
    check_grads(lambda x: ember.jacobian(fn)(x).sum(), (x,), order=1)
    with pytest.raises(TypeError, match="holomorphic"):
        ember.jacobian(fn, holomorphic=True)


def test_named_scope_and_named_call_name_the_equations():
    def block(x):
        with ember.named_scope("attention"):
            y = x * 2.0
        return y + 1.0

    graph = ember.make_graph(ember.named_call(block, name="layer"))(1.0)
    scopes = [eqn.source.scope for eqn in graph.eqns]
    assert scopes == ["layer/attention", "layer"]
    assert "in layer/attention" in str(graph.eqns[0].source)
    graph = ember.make_graph(ember.named_call(block))(1.0)
    assert graph.eqns[1].source.scope == "block"


def test_named_scope_appears_in_errors():
    def bad(x):
        with ember.named_scope("head"):
            return ember.lax.add(x, jnp.ones(4))

    with pytest.raises(ValueError, match="in head"):
        ember.jit(bad)(np.ones(3, np.float32))


def test_ensure_compile_time_eval_gives_concrete_values_under_jit():
    seen = []

    @ember.jit
    def f(x):
        with ember.ensure_compile_time_eval():
            table = jnp.arange(4.0) ** 2
            seen.append(float(table.sum()))  # concrete: Python may look at it
        return x * table

    np.testing.assert_allclose(np.asarray(f(np.ones(4, np.float32))), [0, 1, 4, 9])
    assert seen == [14.0]


def test_against_jax():
    jax = pytest.importorskip("jax")
    w, x = np.ones((4, 2), np.float32), np.zeros((8, 4), np.float32)
    theirs = jax.eval_shape(lambda w, x: {"logits": jax.numpy.tanh(x @ w),
                                          "norm": (w * w).sum()}, w, x)
    ours = ember.eval_shape(_model, w, x)
    assert {k: (v.shape, v.dtype) for k, v in ours.items()} == \
        {k: (v.shape, v.dtype) for k, v in theirs.items()}
    assert repr(ember.ShapeDtypeStruct((3,), np.float32)) == \
        repr(jax.ShapeDtypeStruct((3,), np.float32))
    fn = lambda x: jnp.sin(x) * x.sum()  # noqa: E731
    fn_jax = lambda x: jax.numpy.sin(x) * x.sum()  # noqa: E731
    v = np.array([0.3, -1.2, 2.0], np.float32)
    np.testing.assert_allclose(np.asarray(ember.jacobian(fn)(v)),
                               np.asarray(jax.jacobian(fn_jax)(v)), rtol=1e-6)
    assert len(ember.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0).eqns) == \
        len(jax.make_jaxpr(lambda x: jax.numpy.sin(x) * 2.0)(1.0).eqns)
