"""``ember.custom_batching``: custom_vmap and sequential_vmap, as JAX's."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.custom_batching import custom_vmap, sequential_vmap
from ember.test_util import check_grads


def _make(log):
    @custom_vmap
    def add(x, y):
        return x + y

    @add.def_vmap
    def rule(axis_size, in_batched, x, y):
        log.append((axis_size, in_batched, np.shape(x), np.shape(y)))
        return x + y + 100.0, True

    return add


def test_runs_as_written_outside_vmap():
    log = []
    add = _make(log)
    assert float(add(1.0, 2.0)) == 3.0
    assert float(ember.jit(add)(1.0, 2.0)) == 3.0
    assert log == []


@pytest.mark.parametrize("jitted", [False, True])
def test_vmap_uses_the_rule(jitted):
    log = []
    add = _make(log)
    f = ember.vmap(add, in_axes=(0, None))
    f = ember.jit(f) if jitted else f
    np.testing.assert_allclose(np.asarray(f(jnp.ones(3), 2.0)), [103.0] * 3)
    assert log == [(3, [True, False], (3,), ())]


def test_rule_gets_batch_on_axis_zero_and_pytrees():
    @custom_vmap
    def scale(params, x):
        return {"y": params["w"] * x, "z": params["b"]}

    @scale.def_vmap
    def rule(axis_size, in_batched, params, x):
        assert in_batched == [{"w": False, "b": False}, True]
        assert np.shape(x) == (axis_size, 2)
        return {"y": params["w"] * x, "z": params["b"]}, {"y": True, "z": False}

    params = {"w": jnp.asarray(2.0), "b": jnp.asarray(5.0)}
    out = ember.vmap(scale, in_axes=(None, 1))(params, jnp.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(np.asarray(out["y"]), 2.0 * np.arange(6.0).reshape(2, 3).T)
    np.testing.assert_allclose(np.asarray(out["z"]), [5.0, 5.0, 5.0])  # broadcast by vmap


def test_rule_output_mismatch_is_an_error():
    @custom_vmap
    def f(x):
        return x

    f.def_vmap(lambda n, b, x: (x[0], True))  # claims batched, returns one element
    with pytest.raises(ValueError, match=r"shape \(\) marked batched; expected \(3,\)"):
        ember.vmap(f)(jnp.ones(3))


def test_derivatives_are_the_bodys(x64):
    log = []
    add = _make(log)
    primal, tangent = ember.jvp(add, (1.0, 2.0), (1.0, 1.0))
    assert (float(primal), float(tangent)) == (3.0, 2.0)
    check_grads(lambda x: add(jnp.sin(x), x).sum(), (np.array([0.3, 1.1]),), order=1)


def test_sequential_vmap_loops():
    calls = []

    def host_norm(x):
        return ember.pure_callback(lambda v: calls.append(v.shape) or np.linalg.norm(v),
                                   ember.ShapeDtypeStruct((), np.float32), x)

    f = sequential_vmap(host_norm)
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(np.asarray(ember.vmap(f)(x)), np.linalg.norm(x, axis=1),
                               rtol=1e-6)
    assert calls == [(2,)] * 3


def test_matches_jax():
    jax = pytest.importorskip("jax")

    def build(cb):
        @cb.custom_vmap
        def f(x, y):
            return x * y

        @f.def_vmap
        def rule(axis_size, in_batched, x, y):
            return x * y - 1.0, True

        return f

    ours = ember.vmap(build(ember.custom_batching), in_axes=(0, None))(jnp.arange(3.0), 2.0)
    theirs = jax.vmap(build(jax.custom_batching), in_axes=(0, None))(np.arange(3.0), 2.0)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
