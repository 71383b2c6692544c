"""Transformations composed on a real program: an MLP's loss."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.test_util import check_grads


def init_mlp(rng, sizes):
    return [{"w": rng.standard_normal((m, n)) / np.sqrt(m), "b": rng.standard_normal(n) * 0.1}
            for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss(params, x, y):
    return jnp.mean((predict(params, x) - y) ** 2)


@pytest.fixture
def problem(x64):
    rng = np.random.default_rng(0)
    params = init_mlp(rng, [3, 8, 8, 2])
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    return params, x, y


def _assert_trees_close(a, b, **tol):
    for u, v in zip(ember.tree_util.tree_leaves(a), ember.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), **tol)


def test_mlp_gradient_is_correct(problem):
    check_grads(loss, problem, order=1)


def test_jit_of_grad_equals_grad(problem):
    _assert_trees_close(ember.jit(ember.grad(loss))(*problem), ember.grad(loss)(*problem),
                        rtol=1e-12)


def test_grad_of_grad_of_a_scalar_function(x64):
    def energy(r):
        return jnp.sum(jnp.exp(-r ** 2) * jnp.cos(3 * r))

    r = np.array([0.3, -0.8, 1.1])
    second = ember.grad(lambda r: jnp.sum(ember.grad(energy)(r) ** 2))(r)
    check_grads(lambda r: jnp.sum(ember.grad(energy)(r) ** 2), (r,), order=1)
    np.testing.assert_allclose(second, ember.jit(ember.grad(
        lambda r: jnp.sum(ember.grad(energy)(r) ** 2)))(r), rtol=1e-12)


def test_per_example_gradients_with_vmap_of_grad(problem):
    params, x, y = problem
    per_example = ember.vmap(ember.grad(loss), in_axes=(None, 0, 0))(params, x[:, None],
                                                                     y[:, None])
    for i in range(x.shape[0]):
        single = ember.grad(loss)(params, x[i:i + 1], y[i:i + 1])
        _assert_trees_close(ember.tree_util.tree_map(lambda g: g[i], per_example), single,
                            rtol=1e-10)
    mean = ember.tree_util.tree_map(lambda g: jnp.mean(g, axis=0), per_example)
    _assert_trees_close(mean, ember.grad(loss)(params, x, y), rtol=1e-10)


def test_grad_of_vmap(problem):
    params, x, y = problem

    def batched_loss(params):
        per_example = ember.vmap(lambda xi, yi: jnp.sum((predict(params, xi) - yi) ** 2))(x, y)
        return jnp.sum(per_example) / y.size

    _assert_trees_close(ember.grad(batched_loss)(params), ember.grad(loss)(params, x, y),
                        rtol=1e-10)
    check_grads(batched_loss, (params,), order=1, modes=("rev",))


def test_jit_of_vmap_of_grad(problem):
    params, x, y = problem
    f = ember.vmap(ember.grad(loss), in_axes=(None, 0, 0))
    _assert_trees_close(ember.jit(f)(params, x[:, None], y[:, None]),
                        f(params, x[:, None], y[:, None]), rtol=1e-12)


def test_backward_graph_is_readable_with_source_lines(x64):
    def f(x):
        y = jnp.sin(x)
        return jnp.sum(y * y)

    text = ember.make_graph(ember.grad(f))(np.ones(3)).pretty_print()
    lines = [line for line in text.splitlines() if "=" in line]
    sin_line = f.__code__.co_firstlineno + 1
    here = f"test_compositions.py:{sin_line}"
    assert any("sin" in line and here in line for line in lines)
    # the backward pass: cos (the derivative of sin) and the transposed multiply, each
    # attributed to the forward line it comes from
    assert any(" cos " in line and here in line for line in lines)
    assert all("# " in line for line in lines), text
