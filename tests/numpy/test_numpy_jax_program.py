"""A JAX program (an MLP with random init, indexing, softmax, reductions, grad and jit)
runs on Ember with only its imports changed. When JAX is installed (the optional `bench`
peer), both runs are compared: Ember's random numbers are JAX's, so the results agree."""
import numpy as np
import pytest

JAX_IMPORTS = """
import jax
import jax.numpy as jnp
from jax import random
from jax.nn import log_softmax, one_hot, relu, softmax
"""

EMBER_IMPORTS = """
import ember as jax
import ember.numpy as jnp
from ember import random
from ember.nn import log_softmax, one_hot, relu, softmax
"""

PROGRAM = """
def init_mlp(key, sizes):
    params = []
    keys = random.split(key, len(sizes) - 1)
    for k, (m, n) in zip(keys, zip(sizes[:-1], sizes[1:])):
        w_key, _ = random.split(k)
        params.append((random.normal(w_key, (m, n)) * jnp.sqrt(2.0 / m), jnp.zeros(n)))
    return params


def forward(params, x):
    for w, b in params[:-1]:
        x = relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, labels):
    logits = forward(params, x)
    return -jnp.mean(jnp.sum(one_hot(labels, logits.shape[-1]) * log_softmax(logits), axis=-1))


def accuracy(params, x, labels):
    return jnp.mean(jnp.argmax(forward(params, x), axis=-1) == labels)


def run():
    data_key, init_key, label_key = random.split(random.PRNGKey(0), 3)
    x = random.uniform(data_key, (32, 8), minval=-1.0, maxval=1.0)
    labels = random.randint(label_key, (32,), 0, 4)
    params = init_mlp(init_key, [8, 16, 16, 4])
    batch, batch_labels = x[::2], labels[::2]
    probs = softmax(jax.jit(forward)(params, batch))
    grads = jax.grad(loss)(params, batch, batch_labels)
    params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return {
        "probs": probs,
        "picked": probs[jnp.array([0, 3]), :2],
        "loss": jax.jit(loss)(params, x, labels),
        "accuracy": accuracy(params, x, labels),
        "confident": jnp.where(probs > 0.25, probs, 0.0).sum(axis=1),
        "updated": probs.at[0, jnp.argmax(probs[0])].set(-1.0),
        "column_max": probs.max(axis=0),
        "first_labels": jnp.sort(labels)[:5],
        "grad_norm": jnp.sqrt(sum(jnp.sum(g * g) for g, _ in grads)),
    }
"""


def _run(imports: str) -> dict:
    namespace: dict = {}
    exec(compile(imports + PROGRAM, "<mlp program>", "exec"), namespace)
    return {name: np.asarray(value) for name, value in namespace["run"]().items()}


def test_jax_program_runs_on_ember(backend):
    out = _run(EMBER_IMPORTS)
    assert out["probs"].shape == (16, 4)
    np.testing.assert_allclose(out["probs"].sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out["picked"], out["probs"][[0, 3], :2])
    assert np.isfinite(out["loss"]) and 0.0 < out["loss"] < 10.0
    assert 0.0 <= out["accuracy"] <= 1.0
    assert out["updated"][0].min() == -1.0
    assert list(out["first_labels"]) == sorted(out["first_labels"])
    assert out["grad_norm"] > 0


def test_jax_program_agrees_with_jax():
    pytest.importorskip("jax", reason="JAX is an optional peer (pip install ember[bench])")
    ours, theirs = _run(EMBER_IMPORTS), _run(JAX_IMPORTS)
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=2e-4, atol=2e-5,
                                   err_msg=name)
