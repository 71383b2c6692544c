"""Training through shard_map and pmap equals the unsharded run: 20 SGD steps of an
MLP, float32 against one device (rtol 1e-5, atol 1e-6), on every backend."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P, lax

STEPS, LR = 20, 0.1
RTOL, ATOL = 1e-5, 1e-6


def _data(seed=0, batch=16, d_in=6, hidden=8, d_out=4):
    rng = np.random.default_rng(seed)
    params = {"w1": rng.normal(size=(d_in, hidden)).astype(np.float32) * 0.5,
              "w2": rng.normal(size=(hidden, d_out)).astype(np.float32) * 0.5}
    x = rng.normal(size=(batch, d_in)).astype(np.float32)
    y = rng.normal(size=(batch, d_out)).astype(np.float32)
    return params, x, y


def _mlp(params, x):
    return jnp.tanh(x @ params["w1"]) @ params["w2"]


def _loss(params, x, y):
    return jnp.mean((_mlp(params, x) - y) ** 2)


def _sgd(params, grads):
    return {k: params[k] - LR * grads[k] for k in params}


def _train(step, params, *args):
    losses = []
    for _ in range(STEPS):
        params, loss = step(params, *args)
        losses.append(float(loss))
    return params, losses


@ember.jit
def _reference_step(params, x, y):
    loss, grads = ember.value_and_grad(_loss)(params, x, y)
    return _sgd(params, grads), loss


def _assert_same_run(got, want):
    (p_got, l_got), (p_want, l_want) = got, want
    np.testing.assert_allclose(l_got, l_want, rtol=RTOL, atol=ATOL)
    for k in p_want:
        np.testing.assert_allclose(p_got[k], p_want[k], rtol=RTOL, atol=ATOL)
    assert l_want[-1] < l_want[0]  # the run trains


def test_data_parallel_with_pmean_in_the_loss(mesh8):
    params, x, y = _data()

    def step(params, x, y):  # per shard: 2 examples; params replicated
        def local(params):
            return lax.pmean(_loss(params, x, y), "i")
        loss, grads = ember.value_and_grad(local)(params)  # already summed (check_vma)
        return _sgd(params, grads), loss

    sharded = ember.jit(ember.shard_map(step, mesh=mesh8, in_specs=(P(), P("i"), P("i")),
                                        out_specs=(P(), P())))
    _assert_same_run(_train(sharded, params, x, y), _train(_reference_step, params, x, y))


def test_data_parallel_with_the_gradient_outside(mesh8):
    params, x, y = _data(1)
    loss = ember.shard_map(lambda p, x, y: lax.pmean(_loss(p, x, y), "i"), mesh=mesh8,
                           in_specs=(P(), P("i"), P("i")), out_specs=P())

    @ember.jit
    def step(params, x, y):
        value, grads = ember.value_and_grad(loss)(params, x, y)
        return _sgd(params, grads), value

    _assert_same_run(_train(step, params, x, y), _train(_reference_step, params, x, y))


def test_megatron_tensor_parallel(mesh8):
    """w1 split by columns, w2 by rows: each shard computes a slice of the hidden layer
    and a partial product; one psum in the forward pass completes it."""
    params, x, y = _data(2, hidden=16)

    def step(params, x, y):
        def local(params):
            partial = jnp.tanh(x @ params["w1"]) @ params["w2"]
            return jnp.mean((lax.psum(partial, "i") - y) ** 2)
        loss, grads = ember.value_and_grad(local)(params)
        return _sgd(params, grads), loss

    specs = {"w1": P(None, "i"), "w2": P("i", None)}
    sharded = ember.jit(ember.shard_map(step, mesh=mesh8, in_specs=(specs, P(), P()),
                                        out_specs=(specs, P())))
    _assert_same_run(_train(sharded, params, x, y), _train(_reference_step, params, x, y))


def test_data_and_model_parallel_on_a_4x2_mesh(mesh42):
    params, x, y = _data(3)
    specs = {"w1": P(None, "model"), "w2": P("model", None)}

    def step(params, x, y):
        def local(params):
            out = lax.psum(jnp.tanh(x @ params["w1"]) @ params["w2"], "model")
            return lax.pmean(jnp.mean((out - y) ** 2), "data")
        loss, grads = ember.value_and_grad(local)(params)
        return _sgd(params, grads), loss

    sharded = ember.jit(ember.shard_map(
        step, mesh=mesh42, in_specs=(specs, P("data"), P("data")), out_specs=(specs, P())))
    _assert_same_run(_train(sharded, params, x, y), _train(_reference_step, params, x, y))


def test_pmap_with_psum_gradients(mesh_devices):
    params, x, y = _data(4)
    n = 8

    def step(params, x, y):  # classic pmap: average the gradients by hand
        loss, grads = ember.value_and_grad(_loss)(params, x, y)
        grads = lax.psum(grads, "batch")
        return _sgd(params, {k: g / n for k, g in grads.items()}), lax.pmean(loss, "batch")

    mapped = ember.pmap(step, "batch", in_axes=(None, 0, 0), out_axes=None,
                        devices=mesh_devices)
    shards = lambda a: a.reshape(n, -1, a.shape[-1])  # noqa: E731
    got = _train(lambda p, x, y: mapped(p, shards(x), shards(y)), params, x, y)
    _assert_same_run(got, _train(_reference_step, params, x, y))


def test_pmap_maps_over_the_leading_axis(mesh_devices):
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    out = ember.pmap(lambda a: a - lax.pmean(a, "i"), "i", devices=mesh_devices)(x)
    np.testing.assert_allclose(out, x - x.mean(axis=0), rtol=1e-6)
    moved = ember.pmap(lambda a: a * 2, in_axes=1, out_axes=1, devices=mesh_devices)(x.T)
    np.testing.assert_array_equal(moved, 2 * x.T)
    with pytest.raises(ember.errors.EmberValueError, match="9 devices, but only 8"):
        ember.pmap(lambda a: a, devices=mesh_devices)(np.zeros((9, 2), np.float32))


def test_pmap_uses_the_default_backends_devices():
    with ember.config.override(backend="reference"):
        out = ember.pmap(lambda a: lax.psum(a, "i"), "i")(np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(out, np.full(8, 28.0))
