"""Logistic regression written as a JAX program: the loss from jax.nn.log_sigmoid,
jax.value_and_grad, and a hand-written Adam whose state is a pytree, run in a
jax.lax.scan under jit. Checked against scikit-learn's unpenalized LogisticRegression (C=inf);
only the imports say Ember, and the test runs the same code on JAX."""
import sys
from collections import namedtuple

import numpy as np
import pytest
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp

AdamState = namedtuple("AdamState", "params m v step")
TRUE_WEIGHTS, TRUE_BIAS = np.array([1.5, -2.0, 0.5]), 0.3


def loss(params, x, y):
    logits = x @ params["w"] + params["b"]
    return -jnp.mean(y * jax.nn.log_sigmoid(logits) + (1 - y) * jax.nn.log_sigmoid(-logits))


def adam_update(state, grads, learning_rate=0.02, b1=0.9, b2=0.999, eps=1e-8):
    step = state.step + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state.m, grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g ** 2, state.v, grads)
    params = jax.tree_util.tree_map(
        lambda p, m, v: p - learning_rate * (m / (1 - b1 ** step))
        / (jnp.sqrt(v / (1 - b2 ** step)) + eps),
        state.params, m, v)
    return AdamState(params, m, v, step)


@jax.jit
def train(x, y, iterations=3000):
    params = {"w": jnp.zeros(x.shape[1]), "b": jnp.zeros(())}
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    value_and_grad = jax.value_and_grad(loss)

    def step(state, _):
        value, grads = value_and_grad(state.params, x, y)
        return adam_update(state, grads), value

    state, losses = jax.lax.scan(step, AdamState(params, zeros, zeros, 0), None,
                                 length=iterations)
    return state.params, losses


def main(x, y):
    params, losses = train(x, y)
    accuracy = jnp.mean((jax.nn.sigmoid(x @ params["w"] + params["b"]) > 0.5) == (y > 0.5))
    return {"w": params["w"], "b": params["b"], "losses": losses, "accuracy": accuracy}


def data(seed=0, n=400):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    p = 1 / (1 + np.exp(-(x @ TRUE_WEIGHTS + TRUE_BIAS)))
    return x, (rng.uniform(size=n) < p).astype(np.float64)


def test_fit_matches_scikit_learn(x64):
    linear_model = pytest.importorskip("sklearn.linear_model")
    x, y = data()
    out = main(x, y)
    reference = linear_model.LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)
    reference.fit(x, y)
    np.testing.assert_allclose(out["w"], reference.coef_[0], atol=1e-6)
    np.testing.assert_allclose(out["b"], reference.intercept_[0], atol=1e-6)
    losses = np.asarray(out["losses"])
    assert losses[-1] < losses[0] and abs(losses[-1] - losses[-100]) < 1e-8
    np.testing.assert_allclose(out["accuracy"], reference.score(x, y), atol=1e-12)


def test_gradient_matches_numerical(x64):
    x, y = data(seed=2, n=50)
    params = {"w": jnp.array([0.1, -0.2, 0.3]), "b": jnp.array(0.05)}
    grads = jax.grad(loss)(params, x, y)
    eps = 1e-6
    for i in range(3):
        bump = np.eye(3)[i] * eps
        plus = loss({"w": params["w"] + bump, "b": params["b"]}, x, y)
        minus = loss({"w": params["w"] - bump, "b": params["b"]}, x, y)
        np.testing.assert_allclose(grads["w"][i], (plus - minus) / (2 * eps), rtol=1e-6)
    plus = loss({"w": params["w"], "b": params["b"] + eps}, x, y)
    minus = loss({"w": params["w"], "b": params["b"] - eps}, x, y)
    np.testing.assert_allclose(grads["b"], (plus - minus) / (2 * eps), rtol=1e-6)


def test_matches_jax(x64):
    x, y = data(seed=1)
    ours = main(x, y)
    theirs = run_on_jax(sys.modules[__name__], "main", x, y)
    for key in ("w", "b", "losses"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-8, atol=1e-10, err_msg=key)
    np.testing.assert_allclose(ours["accuracy"], theirs["accuracy"], rtol=1e-6)
