"""Mixed precision: policies, all_finite, float16 dynamic loss scaling through an injected
overflow, and bfloat16 training tracking float32."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import optim
from ember.errors import EmberValueError
from ember.mixed_precision import DynamicLossScale, Policy, all_finite, select_tree


def test_policy_from_string_and_casts():
    policy = Policy.from_string("params=float32, compute=bfloat16, output=float32")
    assert (policy.param_dtype, policy.compute_dtype, policy.output_dtype) == (
        jnp.float32, jnp.bfloat16, jnp.float32)
    tree = {"w": jnp.ones(2), "ids": jnp.arange(3)}
    cast = policy.cast_to_compute(tree)
    assert cast["w"].dtype == jnp.bfloat16 and cast["ids"].dtype == jnp.int32
    assert Policy.from_string("float16").output_dtype == jnp.float16


@pytest.mark.parametrize("spec", ["params=float32,weights=float16", "params", "compute=float8"])
def test_policy_rejects_bad_specs(spec):
    with pytest.raises((EmberValueError, TypeError), match=r"policy entry|dtype"):
        Policy.from_string(spec)


def test_all_finite_ignores_integer_leaves():
    assert bool(all_finite({"a": jnp.ones(2), "i": jnp.arange(2)}))
    assert not bool(all_finite([jnp.ones(2), jnp.asarray([1.0, np.inf], jnp.float16)]))
    assert not bool(all_finite([jnp.asarray(np.nan)]))


def _mlp_params(rng: np.random.Generator) -> dict:
    return {"w1": jnp.asarray(rng.standard_normal((8, 32)) / np.sqrt(8), jnp.float32),
            "b1": jnp.zeros(32),
            "w2": jnp.asarray(rng.standard_normal((32, 1)) / np.sqrt(32), jnp.float32),
            "b2": jnp.zeros(1)}


def _mlp_loss(policy: Policy):
    def loss(params, x, y):
        p = policy.cast_to_compute(params)
        hidden = jnp.tanh(jnp.matmul(x.astype(policy.compute_dtype), p["w1"]) + p["b1"])
        pred = jnp.matmul(hidden, p["w2"]) + p["b2"]
        return jnp.mean(jnp.square(pred - y.astype(policy.compute_dtype)))

    return loss


def _loss_scaled_step(policy: Policy, optimizer):
    """The float16 recipe: scale the loss, unscale the grads, skip the step on overflow."""
    loss_fn = _mlp_loss(policy)

    @ember.jit
    def step(params, opt_state, scale, x, y):
        grads = ember.grad(lambda p: scale.scale_loss(loss_fn(p, x, y)))(params)
        grads = scale.unscale(grads)
        finite = all_finite(grads)
        updates, new_opt_state = optimizer.update(grads, opt_state, params)
        new_params = optim.apply_updates(params, updates)
        params, opt_state = select_tree(finite, (new_params, new_opt_state), (params, opt_state))
        return params, opt_state, scale.adjust(finite)

    return step


def test_float16_loss_scaling_skips_an_overflowing_step(backend):
    rng = np.random.default_rng(0)
    policy = Policy.from_string("params=float32,compute=float16,output=float32")
    optimizer = optim.adam(1e-2)
    step = _loss_scaled_step(policy, optimizer)
    params = _mlp_params(rng)
    opt_state = optimizer.init(params)
    scale = DynamicLossScale.create(2.0 ** 15, period=2)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    y = rng.standard_normal((16, 1)).astype(np.float32)

    # Targets of 1e3 make the scaled float16 gradients overflow to inf.
    skipped, skipped_state, after = step(params, opt_state, scale, x, 1e3 + y)
    for key in params:
        np.testing.assert_array_equal(np.asarray(skipped[key]), np.asarray(params[key]))
    assert int(skipped_state.step) == 0, "the optimizer state advanced on an overflow"
    assert float(after.scale) == 2.0 ** 14 and int(after.good_steps) == 0

    # Ordinary data: the step goes through; after `period` good steps the scale doubles.
    moved, state, after = step(skipped, skipped_state, after, x, y)
    assert all(bool(all_finite(moved[k])) for k in moved)
    assert not np.array_equal(np.asarray(moved["w1"]), np.asarray(params["w1"]))
    assert int(state.step) == 1 and int(after.good_steps) == 1
    _, _, after = step(moved, state, after, x, y)
    assert float(after.scale) == 2.0 ** 15 and int(after.good_steps) == 0


def _train(policy: Policy, steps: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = np.sin(x @ rng.standard_normal((8, 1))) + 0.1 * rng.standard_normal((64, 1))
    y = y.astype(np.float32)
    params = _mlp_params(rng)
    optimizer = optim.adam(1e-2)
    loss_fn = _mlp_loss(policy)

    @ember.jit
    def step(params, opt_state):
        loss, grads = ember.value_and_grad(lambda p: loss_fn(p, x, y).astype(jnp.float32))(params)
        assert all(g.dtype == jnp.float32 for g in ember.tree_util.tree_leaves(grads))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    opt_state = optimizer.init(params)
    losses = []
    for _ in range(steps):
        params, opt_state, loss = step(params, opt_state)
        losses.append(float(loss))
    return np.array(losses)


def test_bfloat16_training_tracks_float32(backend):
    """Tolerance: at every one of 80 steps the bfloat16-compute loss is within 5% (plus
    0.002 absolute, for the tail near the noise floor) of the float32 loss."""
    full = _train(Policy.from_string("float32"), 80)
    mixed = _train(Policy.from_string("params=float32,compute=bfloat16,output=float32"), 80)
    assert full[-1] < 0.1 * full[0], "the float32 reference run did not learn"
    np.testing.assert_allclose(mixed, full, rtol=0.05, atol=2e-3)
