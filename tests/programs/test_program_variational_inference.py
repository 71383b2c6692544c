"""Variational inference, written as a JAX program: a diagonal Gaussian fitted to the
posterior of a Bayesian linear regression by maximizing a reparameterized Monte Carlo
ELBO (jax.scipy.stats.norm for every density, jax.random for the noise). The posterior
is Gaussian, so the optimum is known in closed form: the posterior mean, and variances
1 / diag(posterior precision). Only the imports say Ember; the test runs the same code
on JAX and compares."""
import sys

import numpy as np
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp
from ember.scipy.stats import norm

NOISE, PRIOR = 0.5, 2.0


def log_joint(w, x, y):
    log_prior = jnp.sum(norm.logpdf(w, 0.0, PRIOR))
    log_likelihood = jnp.sum(norm.logpdf(y, x @ w, NOISE))
    return log_prior + log_likelihood


def elbo(params, key, x, y, num_samples=64):
    mean, log_std = params
    eps = jax.random.normal(key, (num_samples, mean.shape[0]))
    samples = mean + jnp.exp(log_std) * eps  # the reparameterization trick
    log_q = jnp.sum(norm.logpdf(samples, mean, jnp.exp(log_std)), axis=1)
    log_p = jax.vmap(log_joint, in_axes=(0, None, None))(samples, x, y)
    return jnp.mean(log_p - log_q)


@jax.jit
def step(params, key, x, y, learning_rate=2e-3):
    loss, grads = jax.value_and_grad(lambda p: -elbo(p, key, x, y))(params)
    return jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads), loss


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + NOISE * rng.normal(size=50)
    return x, y


def main(steps=1500):
    x, y = data()
    params = (jnp.zeros(3), jnp.zeros(3))
    key = jax.random.PRNGKey(0)
    losses = []
    for _ in range(steps):
        key, subkey = jax.random.split(key)
        params, loss = step(params, subkey, x, y)
        losses.append(loss)
    return {"mean": params[0], "std": jnp.exp(params[1]), "losses": jnp.stack(losses)}


def _exact_posterior(x, y):
    precision = x.T @ x / NOISE**2 + np.eye(x.shape[1]) / PRIOR**2
    mean = np.linalg.solve(precision, x.T @ y / NOISE**2)
    return mean, precision


def test_vi_recovers_the_exact_posterior(x64):
    x, y = data()
    out = main()
    mean, precision = _exact_posterior(x, y)
    # The best diagonal Gaussian: the posterior mean, and the conditional variances.
    np.testing.assert_allclose(out["mean"], mean, atol=0.02)
    np.testing.assert_allclose(out["std"], 1 / np.sqrt(np.diag(precision)), rtol=0.1)
    losses = np.asarray(out["losses"])
    assert losses[-100:].mean() < 0.1 * losses[0]  # the negative ELBO, from about 1000


def test_elbo_and_its_gradient_match_scipy(x64):
    import scipy.stats

    x, y = data()
    rng = np.random.default_rng(1)
    params = (rng.normal(size=3), rng.normal(size=3) * 0.1)
    key = jax.random.PRNGKey(3)
    eps = np.asarray(jax.random.normal(key, (64, 3)))
    samples = params[0] + np.exp(params[1]) * eps
    log_p = [scipy.stats.norm.logpdf(s, 0, PRIOR).sum()
             + scipy.stats.norm.logpdf(y, x @ s, NOISE).sum() for s in samples]
    log_q = scipy.stats.norm.logpdf(samples, params[0], np.exp(params[1])).sum(axis=1)
    np.testing.assert_allclose(elbo(params, key, x, y), np.mean(np.array(log_p) - log_q),
                               rtol=1e-12)
    grads = jax.grad(elbo)(params, key, x, y)
    for i in range(2):
        for j in range(3):
            bumped = [list(map(np.array, params)) for _ in range(2)]
            bumped[0][i][j] += 1e-6
            bumped[1][i][j] -= 1e-6
            numeric = (elbo(tuple(bumped[0]), key, x, y)
                       - elbo(tuple(bumped[1]), key, x, y)) / 2e-6
            np.testing.assert_allclose(grads[i][j], numeric, rtol=1e-5)


def test_vi_matches_jax(x64):
    ours = main(steps=200)
    theirs = run_on_jax(sys.modules[__name__], "main", 200)
    # The same keys give the same noise, so the two runs follow the same path.
    for key in ("mean", "std", "losses"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, atol=1e-8, err_msg=key)
