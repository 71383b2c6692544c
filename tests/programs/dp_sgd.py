"""Differentially private SGD: per-example gradients with vmap, each clipped to an L2
norm, summed, noised and averaged (Abadi et al., 2016), on a small classifier.

Written as a JAX program; only the two imports below differ from the JAX version
(``test_dp_sgd.py`` runs this same text with ``import jax`` when JAX is installed).
"""
import ember as jax
import ember.numpy as jnp

L2_CLIP = 1.0
NOISE_MULTIPLIER = 0.5
LEARNING_RATE = 0.5
BATCH_SIZE = 32


def make_data(key, n=256, n_features=4):
    """Two Gaussian blobs, labels -1 and +1."""
    k_x, k_y = jax.random.split(key)
    y = jnp.where(jax.random.bernoulli(k_y, 0.5, (n,)), 1.0, -1.0)
    centers = jnp.outer(y, jnp.ones(n_features)) * 1.5
    x = centers + jax.random.normal(k_x, (n, n_features))
    return x, y


def init_params(key, n_features, n_hidden=8):
    k1, k2 = jax.random.split(key)
    return {
        "hidden": {"w": jax.random.normal(k1, (n_features, n_hidden)) / jnp.sqrt(n_features),
                   "b": jnp.zeros(n_hidden)},
        "out": {"w": jax.random.normal(k2, (n_hidden,)) / jnp.sqrt(n_hidden),
                "b": jnp.zeros(())},
    }


def predict(params, x):
    h = jnp.tanh(x @ params["hidden"]["w"] + params["hidden"]["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def loss(params, x, y):
    """Logistic loss of one example (y is -1 or +1)."""
    return jnp.logaddexp(0.0, -y * predict(params, x))


per_example_grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))


def global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(leaf ** 2) for leaf in jax.tree.leaves(tree)))


def clip(grads, max_norm):
    factor = jnp.minimum(1.0, max_norm / (global_norm(grads) + 1e-6))
    return jax.tree.map(lambda g: g * factor, grads)


def clipped_grads(params, x, y):
    return jax.vmap(clip, in_axes=(0, None))(per_example_grads(params, x, y), L2_CLIP)


@jax.jit
def private_update(params, key, x, y):
    summed = jax.tree.map(lambda g: g.sum(axis=0), clipped_grads(params, x, y))
    leaves, treedef = jax.tree_util.tree_flatten(summed)
    keys = jax.tree_util.tree_unflatten(treedef, list(jax.random.split(key, len(leaves))))
    noisy = jax.tree.map(
        lambda g, k: (g + NOISE_MULTIPLIER * L2_CLIP * jax.random.normal(k, g.shape)) / x.shape[0],
        summed, keys)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, noisy)


@jax.jit
def accuracy(params, x, y):
    return jnp.mean(jnp.sign(predict(params, x)) == y)


def train(seed=0, epochs=5):
    key = jax.random.PRNGKey(seed)
    data_key, init_key, key = jax.random.split(key, 3)
    x, y = make_data(data_key)
    params = init_params(init_key, x.shape[1])
    for _ in range(epochs):
        for start in range(0, x.shape[0], BATCH_SIZE):
            key, step_key = jax.random.split(key)
            batch = slice(start, start + BATCH_SIZE)
            params = private_update(params, step_key, x[batch], y[batch])
    return params, x, y
