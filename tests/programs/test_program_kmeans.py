"""k-means clustering written as a JAX program: distances with vmap, Lloyd's updates in
a jax.lax.while_loop that stops when the centroids stop moving, all under jit. Only the
imports say Ember; the test runs the same code on JAX and compares."""
import sys

import numpy as np
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp

CENTRES = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def assign(points, centroids):
    distances = jax.vmap(lambda p: jnp.sum((centroids - p) ** 2, axis=1))(points)
    return jnp.argmin(distances, axis=1)


@jax.jit
def kmeans(points, initial, tol=1e-9, max_steps=100):
    k = initial.shape[0]

    def moving(state):
        _, shift, count = state
        return (shift > tol) & (count < max_steps)

    def lloyd_step(state):
        centroids, _, count = state
        labels = assign(points, centroids)
        one_hot = jax.nn.one_hot(labels, k)
        counts = jnp.sum(one_hot, axis=0)
        sums = one_hot.T @ points
        updated = jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None],
                            centroids)
        return updated, jnp.max(jnp.abs(updated - centroids)), count + 1

    centroids, _, steps = jax.lax.while_loop(moving, lloyd_step, (initial, jnp.inf, 0))
    return centroids, assign(points, centroids), steps


def main(points, initial):
    centroids, labels, steps = kmeans(points, initial)
    return {"centroids": centroids, "labels": labels, "steps": steps}


def blobs(seed=0, per_cluster=60):
    rng = np.random.default_rng(seed)
    points = np.concatenate([c + 0.5 * rng.standard_normal((per_cluster, 2)) for c in CENTRES])
    truth = np.repeat(np.arange(len(CENTRES)), per_cluster)
    return points, truth, points[[0, per_cluster, 2 * per_cluster]] + 1.0


def lloyd_numpy(points, centroids):
    while True:
        labels = np.argmin(((points[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
        updated = np.stack([points[labels == j].mean(0) for j in range(len(centroids))])
        if np.abs(updated - centroids).max() <= 1e-9:
            return updated, labels
        centroids = updated


def test_kmeans_recovers_the_clusters(x64):
    points, truth, initial = blobs()
    out = main(points, initial)
    labels = np.asarray(out["labels"])
    np.testing.assert_array_equal(labels, truth)
    centroids, reference_labels = lloyd_numpy(points, initial)
    np.testing.assert_allclose(out["centroids"], centroids, atol=1e-12)
    np.testing.assert_array_equal(labels, reference_labels)
    np.testing.assert_allclose(out["centroids"], CENTRES, atol=0.2)
    assert 1 < int(out["steps"]) < 100


def test_matches_jax(x64):
    points, _, initial = blobs(seed=1)
    ours = main(points, initial)
    theirs = run_on_jax(sys.modules[__name__], "main", points, initial)
    np.testing.assert_allclose(ours["centroids"], theirs["centroids"], rtol=1e-12)
    np.testing.assert_array_equal(ours["labels"], theirs["labels"])
    assert int(ours["steps"]) == int(theirs["steps"])
