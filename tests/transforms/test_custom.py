"""custom_jvp and custom_vjp: the user's rule is used by every transformation."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.transforms.calls import inline_calls


@ember.custom_jvp
def log1pexp(x):
    return jnp.log(1.0 + jnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    # the numerically stable derivative: the naive one is inf/inf = nan for large x
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + jnp.exp(x)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_custom_jvp_rule_is_used_in_both_modes(x64):
    x = np.array([0.0, 2.0, 800.0])
    _, tangent = ember.jvp(log1pexp, (x,), (np.ones(3),))
    np.testing.assert_allclose(tangent, _sigmoid(x))
    np.testing.assert_allclose(ember.grad(lambda x: jnp.sum(log1pexp(x)))(x), _sigmoid(x))


def test_custom_jvp_composes_with_jit_vmap_and_higher_order(x64):
    x = np.array([0.5, -1.0])
    grad = ember.grad(lambda x: jnp.sum(log1pexp(x)))
    np.testing.assert_allclose(ember.jit(grad)(x), _sigmoid(x))
    np.testing.assert_allclose(ember.vmap(ember.grad(log1pexp))(x), _sigmoid(x))
    np.testing.assert_allclose(ember.grad(lambda x: jnp.sum(ember.vmap(log1pexp)(x)))(x),
                               _sigmoid(x))
    second = ember.vmap(ember.grad(ember.grad(log1pexp)))(x)
    np.testing.assert_allclose(second, _sigmoid(x) * (1 - _sigmoid(x)))


def test_custom_jvp_with_nondiff_argnums_and_defjvps(x64):
    def apply(fn, x):
        return fn(x)

    f = ember.custom_jvp(apply, nondiff_argnums=(0,))
    f.defjvp(lambda fn, primals, tangents: (fn(primals[0]), 10.0 * tangents[0]))
    assert float(ember.grad(lambda x: f(jnp.sin, x))(np.array(0.3))) == 10.0

    g = ember.custom_jvp(lambda x, y: x * y)
    g.defjvps(lambda t, out, x, y: t * 2.0, None)
    dx, dy = ember.grad(g, argnums=(0, 1))(np.array(3.0), np.array(4.0))
    assert (float(dx), float(dy)) == (2.0, 0.0)


def test_custom_jvp_staged_in_a_graph_keeps_its_rule(x64):
    graph = ember.make_graph(log1pexp)(np.array(1.0))
    assert [e.prim.name for e in graph.eqns] == ["custom_jvp_call"]
    flat = inline_calls(graph)
    assert "custom_jvp_call" not in {e.prim.name for e in flat.eqns}
    assert "exp" in {e.prim.name for e in flat.eqns}


def test_custom_jvp_closing_over_a_differentiated_value_is_an_error(x64):
    def outer(y):
        f = ember.custom_jvp(lambda x: x * y)
        f.defjvp(lambda p, t: (f(*p), t[0] * y))
        return f(np.array(2.0))

    with pytest.raises(TypeError, match="closes over"):
        ember.grad(outer)(np.array(3.0))


@ember.custom_vjp
def clip_gradient(x, bound):
    return x


def _clip_fwd(x, bound):
    return x, bound


def _clip_bwd(bound, ct):
    return (jnp.clip(ct, -bound, bound), None)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_rule_is_used(x64):
    grad = ember.grad(lambda x: jnp.sum(clip_gradient(x, 0.5) * np.array([2.0, 0.1])))
    np.testing.assert_allclose(grad(np.array([1.0, 1.0])), [0.5, 0.1])
    np.testing.assert_allclose(ember.jit(grad)(np.array([1.0, 1.0])), [0.5, 0.1])


def test_custom_vjp_under_vmap_both_ways(x64):
    xs = np.array([1.0, 2.0, 3.0])
    per_example = ember.vmap(ember.grad(lambda x: clip_gradient(x, 0.5) * x))(xs)
    np.testing.assert_allclose(per_example, 0.5 + xs)
    batched = ember.grad(lambda xs: jnp.sum(ember.vmap(
        lambda x: clip_gradient(x, 0.5) * x)(xs)))(xs)
    np.testing.assert_allclose(batched, 0.5 + xs)


def test_custom_vjp_second_order(x64):
    @ember.custom_vjp
    def square(x):
        return x * x

    square.defvjp(lambda x: (x * x, x), lambda x, ct: (2.0 * x * ct,))
    assert float(ember.grad(ember.grad(square))(np.array(3.0))) == 2.0


def test_forward_mode_of_custom_vjp_is_an_error(x64):
    with pytest.raises(TypeError, match="custom_vjp.*custom_jvp"):
        ember.jvp(lambda x: clip_gradient(x, 1.0), (np.array(1.0),), (np.array(1.0),))


def test_custom_vjp_bwd_must_match_the_arguments(x64):
    f = ember.custom_vjp(lambda x, y: x * y)
    f.defvjp(lambda x, y: (x * y, None), lambda res, ct: (ct,))
    with pytest.raises(TypeError, match="one cotangent per"):
        ember.grad(f)(np.array(1.0), np.array(2.0))


def test_missing_rules_are_reported():
    f = ember.custom_jvp(lambda x: x)
    with pytest.raises(TypeError, match="defjvp"):
        ember.jit(f)(np.ones(2))


def test_custom_vjp_with_nondiff_argnums(x64):
    def scaled(scale, x):
        return x * scale

    f = ember.custom_vjp(scaled, nondiff_argnums=(0,))
    f.defvjp(lambda scale, x: (x * scale, None),
             lambda scale, res, ct: (ct * scale * 10.0,))
    assert float(ember.grad(lambda x: f(3.0, x))(np.array(1.0))) == 30.0
    np.testing.assert_allclose(ember.jit(ember.vmap(ember.grad(lambda x: f(2.0, x))))(
        np.ones(3)), np.full(3, 20.0))
