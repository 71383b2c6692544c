"""Principal component analysis, written as a JAX program: exact PCA from the SVD of
the centered data (jax.scipy.linalg.svd), and randomized PCA from a QR range finder
(jax.scipy.linalg.qr) followed by the SVD of the small projected matrix. Only the
imports say Ember; the test runs the same code on JAX and compares."""
import sys

import numpy as np
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp
from ember.scipy.linalg import qr, svd


@jax.jit
def pca(x):
    centered = x - jnp.mean(x, axis=0)
    _, s, vt = svd(centered, full_matrices=False)
    explained_variance = s**2 / (x.shape[0] - 1)
    return vt, explained_variance, explained_variance / jnp.sum(explained_variance)


def randomized_pca(x, key, rank, oversample=5, power_iterations=2):
    centered = x - jnp.mean(x, axis=0)
    omega = jax.random.normal(key, (x.shape[1], rank + oversample))
    q, _ = qr(centered @ omega, mode="economic")
    for _ in range(power_iterations):  # sharpen the spectrum: (A A^T)^k A omega
        q, _ = qr(centered.T @ q, mode="economic")
        q, _ = qr(centered @ q, mode="economic")
    _, s, vt = svd(q.T @ centered, full_matrices=False)
    return vt[:rank], s[:rank] ** 2 / (x.shape[0] - 1)


def reconstruction_error(x, components):
    centered = x - jnp.mean(x, axis=0)
    projected = centered @ components.T @ components
    return jnp.sum((centered - projected) ** 2)


def data():
    """200 points near a 3-dimensional subspace of R^10."""
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.normal(size=(10, 3)))[0].T
    latent = rng.normal(size=(200, 3)) * np.array([5.0, 3.0, 1.5])
    return latent @ basis + 0.05 * rng.normal(size=(200, 10)) + 2.0, basis


def main():
    x, _ = data()
    components, variance, ratio = pca(x)
    fast_components, fast_variance = randomized_pca(x, jax.random.PRNGKey(0), rank=3)
    return {"components": components, "variance": variance, "ratio": ratio,
            "fast_components": fast_components, "fast_variance": fast_variance,
            "error_3": reconstruction_error(x, components[:3]),
            "fast_error_3": reconstruction_error(x, fast_components)}


def _same_up_to_sign(a, b, atol):
    a, b = np.asarray(a), np.asarray(b)
    signs = np.sign(np.sum(a * b, axis=1, keepdims=True))
    np.testing.assert_allclose(a * signs, b, atol=atol)


def test_pca_matches_scikit_learn_and_finds_the_subspace(x64):
    from sklearn.decomposition import PCA

    x, basis = data()
    out = main()
    reference = PCA().fit(x)
    np.testing.assert_allclose(out["variance"], reference.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(out["ratio"], reference.explained_variance_ratio_, rtol=1e-10,
                               atol=1e-15)
    _same_up_to_sign(out["components"], reference.components_, atol=1e-8)
    assert float(np.sum(np.asarray(out["ratio"])[:3])) > 0.999
    # The top three components span the planted subspace.
    overlap = np.linalg.svd(np.asarray(out["components"][:3]) @ basis.T, compute_uv=False)
    np.testing.assert_allclose(overlap, 1.0, atol=1e-4)
    # The residual is the discarded variance, and the randomized PCA finds the same.
    discarded = float(np.sum(np.asarray(out["variance"])[3:]) * (x.shape[0] - 1))
    np.testing.assert_allclose(out["error_3"], discarded, rtol=1e-8)
    np.testing.assert_allclose(out["fast_variance"], out["variance"][:3], rtol=1e-6)
    _same_up_to_sign(out["fast_components"], out["components"][:3], atol=1e-4)
    np.testing.assert_allclose(out["fast_error_3"], out["error_3"], rtol=1e-4)


def test_pca_matches_jax(x64):
    ours = main()
    theirs = run_on_jax(sys.modules[__name__], "main")
    for key in ("variance", "ratio", "fast_variance", "error_3", "fast_error_3"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-8, err_msg=key)
    # The same key gives the same random projection.
    _same_up_to_sign(ours["components"], theirs["components"], atol=1e-8)
    _same_up_to_sign(ours["fast_components"], theirs["fast_components"], atol=1e-8)
