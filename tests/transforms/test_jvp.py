"""Forward mode: ember.jvp and ember.linearize."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.ops.rules import float0


def test_jvp_of_a_composite_function(x64):
    x, t = np.array([0.3, 1.2]), np.array([1.0, -2.0])
    out, tangent = ember.jvp(lambda x: jnp.sin(x) * x, (x,), (t,))
    np.testing.assert_allclose(out, np.sin(x) * x)
    np.testing.assert_allclose(tangent, (np.cos(x) * x + np.sin(x)) * t)


def test_jvp_over_pytrees_with_aux(x64):
    params = {"w": np.array([1.0, 2.0]), "b": np.array(0.5)}
    tangents = {"w": np.array([1.0, 0.0]), "b": np.array(1.0)}

    def f(p):
        y = jnp.sum(p["w"] ** 2) + p["b"]
        return {"y": y, "twice": 2 * y}, "aux"

    out, tangent, aux = ember.jvp(f, (params,), (tangents,), has_aux=True)
    assert aux == "aux"
    assert float(out["y"]) == 5.5 and float(tangent["y"]) == 3.0
    assert float(tangent["twice"]) == 6.0


def test_integer_inputs_and_outputs_have_float0_tangents(x64):
    def f(x, n):
        return x * n, n + 1

    (y, m), (ty, tm) = ember.jvp(f, (np.array(2.0), np.array(3)),
                                 (np.array(1.0), np.zeros((), float0)))
    assert float(ty) == 3.0
    assert np.asarray(tm).dtype == float0


def test_tangent_dtype_must_match_primal():
    with pytest.raises(TypeError, match="f32\\[2\\].*f32\\[3\\]"):
        ember.jvp(jnp.sin, (np.ones(2, np.float32),), (np.ones(3, np.float32),))


def test_primals_and_tangents_must_share_structure():
    with pytest.raises(TypeError, match="different structures"):
        ember.jvp(lambda a, b: a, (np.ones(2), np.ones(2)), (np.ones(2),))


def test_linearize_matches_jvp_and_does_not_retrace(x64):
    calls = []

    def f(x):
        calls.append(1)
        return jnp.exp(x) * jnp.cos(x)

    x = np.array([0.1, 0.7, -1.0])
    out, f_jvp = ember.linearize(f, x)
    traced = len(calls)
    for t in (np.ones(3), np.array([0.0, 2.0, -1.0])):
        np.testing.assert_allclose(f_jvp(t), ember.jvp(f, (x,), (t,))[1])
    assert len(calls) == traced + 2  # the two jvp calls, not f_jvp
    np.testing.assert_allclose(out, f(x))


def test_jvp_through_jit_and_jit_of_jvp(x64):
    f = ember.jit(lambda x: jnp.tanh(x) ** 2)
    x, t = np.array([0.2, -0.4]), np.array([1.0, 1.0])
    expected = 2 * np.tanh(x) * (1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(ember.jvp(f, (x,), (t,))[1], expected)
    jitted = ember.jit(lambda x, t: ember.jvp(f, (x,), (t,)))
    np.testing.assert_allclose(jitted(x, t)[1], expected)


def test_stop_gradient_blocks_tangents(x64):
    _, tangent = ember.jvp(lambda x: x * ember.stop_gradient(x), (np.array(3.0),),
                           (np.array(1.0),))
    assert float(tangent) == 3.0
