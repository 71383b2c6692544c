"""Optimizers: one update against the textbook formulas in NumPy, and loss going down on a
least-squares problem for every optimizer (with clipping and schedules), jitted."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import optim
from ember.errors import EmberValueError


def _tree(rng: np.random.Generator) -> dict:
    return {"w": rng.standard_normal((3, 2)).astype(np.float32),
            "b": rng.standard_normal(2).astype(np.float32)}


def _numpy_sgd(params, grads_seq, lr, momentum=0.0, nesterov=False):
    velocity = {k: np.zeros_like(v) for k, v in params.items()}
    params = dict(params)
    for grads in grads_seq:
        for k in params:
            velocity[k] = momentum * velocity[k] + grads[k]
            direction = grads[k] + momentum * velocity[k] if nesterov else velocity[k]
            params[k] = params[k] - lr * direction
    return params


def _numpy_adam(params, grads_seq, lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0):
    mu = {k: np.zeros_like(v) for k, v in params.items()}
    nu = {k: np.zeros_like(v) for k, v in params.items()}
    params = dict(params)
    for t, grads in enumerate(grads_seq, start=1):
        for k in params:
            mu[k] = b1 * mu[k] + (1 - b1) * grads[k]
            nu[k] = b2 * nu[k] + (1 - b2) * grads[k] ** 2
            step = (mu[k] / (1 - b1 ** t)) / (np.sqrt(nu[k] / (1 - b2 ** t)) + eps)
            params[k] = params[k] - lr * (step + weight_decay * params[k])
    return params


CASES = {
    "sgd": (optim.sgd(0.1), lambda p, g: _numpy_sgd(p, g, 0.1)),
    "momentum": (optim.sgd(0.1, momentum=0.9),
                 lambda p, g: _numpy_sgd(p, g, 0.1, momentum=0.9)),
    "nesterov": (optim.sgd(0.1, momentum=0.9, nesterov=True),
                 lambda p, g: _numpy_sgd(p, g, 0.1, momentum=0.9, nesterov=True)),
    "adam": (optim.adam(0.01), lambda p, g: _numpy_adam(p, g, 0.01)),
    "adamw": (optim.adamw(0.01, weight_decay=0.1),
              lambda p, g: _numpy_adam(p, g, 0.01, weight_decay=0.1)),
}


def _run(optimizer, params, grads_seq):
    state = optimizer.init(params)
    for grads in grads_seq:
        updates, state = optimizer.update(grads, state, params)
        params = optim.apply_updates(params, updates)
    return params


@pytest.mark.parametrize("name", sorted(CASES))
def test_updates_match_numpy_formulas(name):
    rng = np.random.default_rng(0)
    params = _tree(rng)
    grads_seq = [_tree(rng) for _ in range(3)]
    optimizer, reference = CASES[name]
    got = _run(optimizer, params, grads_seq)
    expected = reference(params, grads_seq)
    for key in params:
        np.testing.assert_allclose(np.asarray(got[key]), expected[key], rtol=1e-5, atol=1e-6)
        assert got[key].dtype == np.float32


def _least_squares():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = x @ np.array([1.5, -2.0, 0.5, 3.0], np.float32) + 0.7
    params = {"w": jnp.zeros(4), "b": jnp.zeros(())}

    def loss(p):
        return jnp.mean(jnp.square(jnp.matmul(x, p["w"]) + p["b"] - y))

    return params, loss


TRAINING = {
    "sgd": optim.sgd(0.1),
    "momentum": optim.sgd(0.02, momentum=0.9),
    "nesterov": optim.sgd(0.02, momentum=0.9, nesterov=True),
    "adam": optim.adam(0.2),
    "adamw": optim.adamw(0.2, weight_decay=1e-3),
    "adamw+clip+warmup_cosine": optim.chain(
        optim.clip_by_global_norm(1.0),
        optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 0.3, 5, 60, 0.01))),
    "sgd+step_schedule": optim.sgd(optim.step_schedule(0.1, 20, 0.5), momentum=0.5),
}


@pytest.mark.parametrize("name", sorted(TRAINING))
def test_loss_goes_down(name, backend):
    params, loss = _least_squares()
    optimizer = TRAINING[name]

    @ember.jit
    def step(p, state):
        value, grads = ember.value_and_grad(loss)(p)
        updates, state = optimizer.update(grads, state, p)
        return optim.apply_updates(p, updates), state, value

    state = optimizer.init(params)
    losses = []
    for _ in range(60):
        params, state, value = step(params, state)
        losses.append(float(value))
    assert losses[-1] < 0.02 * losses[0], f"{name}: loss {losses[0]:.3f} -> {losses[-1]:.3f}"


def test_adamw_needs_params():
    optimizer = optim.adamw(0.1)
    params = {"w": jnp.ones(3)}
    with pytest.raises(EmberValueError, match="needs the params"):
        optimizer.update(params, optimizer.init(params))


def test_updates_keep_parameter_dtypes_and_moments_are_float32():
    params = {"w": jnp.ones(3, jnp.bfloat16)}
    optimizer = optim.adam(0.1)
    state = optimizer.init(params)
    updates, state = optimizer.update(params, state, params)
    assert updates["w"].dtype == jnp.bfloat16
    assert state.mu["w"].dtype == jnp.float32
    assert optim.apply_updates(params, updates)["w"].dtype == jnp.bfloat16
