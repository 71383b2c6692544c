"""Hamiltonian Monte Carlo written as a JAX program: leapfrog steps in a
jax.lax.fori_loop, gradients from jax.grad, jax.random key splits per draw and a
Metropolis accept/reject, the chain a jax.lax.scan under jit, sampling a correlated 2-D
Gaussian. Only the imports say Ember; the test checks the sample moments and runs the
same code on JAX."""
import sys
from functools import partial

import numpy as np
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp

MEAN = np.array([1.0, -2.0])
COV = np.array([[1.0, 0.8], [0.8, 2.0]])
PRECISION = np.linalg.inv(COV)


def log_density(x):
    d = x - MEAN
    return -0.5 * d @ PRECISION @ d


def leapfrog(x, p, step_size, n_steps):
    grad = jax.grad(log_density)
    p = p + 0.5 * step_size * grad(x)

    def body(_, state):
        x, p = state
        x = x + step_size * p
        return x, p + step_size * grad(x)

    x, p = jax.lax.fori_loop(0, n_steps - 1, body, (x, p))
    x = x + step_size * p
    return x, p + 0.5 * step_size * grad(x)


def hmc_step(x, key, step_size=0.25, n_steps=10):
    momentum_key, accept_key = jax.random.split(key)
    p = jax.random.normal(momentum_key, x.shape)
    x_new, p_new = leapfrog(x, p, step_size, n_steps)
    log_ratio = (log_density(x_new) - 0.5 * p_new @ p_new) - (log_density(x) - 0.5 * p @ p)
    accept = jnp.log(jax.random.uniform(accept_key)) < log_ratio
    return jnp.where(accept, x_new, x), accept


@partial(jax.jit, static_argnums=2)
def sample(key, x0, n_samples):
    def draw(x, key):
        x, accepted = hmc_step(x, key)
        return x, (x, accepted)

    _, (xs, accepted) = jax.lax.scan(draw, x0, jax.random.split(key, n_samples))
    return xs, jnp.mean(accepted)


def main(seed, n_samples):
    xs, acceptance = sample(jax.random.PRNGKey(seed), jnp.zeros(2), n_samples)
    return {"samples": xs, "acceptance": acceptance}


def test_samples_have_the_target_moments(x64):
    out = main(0, 2000)
    samples = np.asarray(out["samples"])[200:]
    assert 0.6 < float(out["acceptance"]) <= 1.0
    # Loose bounds: 1800 correlated draws; a wrong gradient or acceptance misses them.
    np.testing.assert_allclose(samples.mean(0), MEAN, atol=0.2)
    np.testing.assert_allclose(np.cov(samples.T), COV, atol=0.35)
    assert len(np.unique(samples[:, 0])) > 0.5 * len(samples)


def test_leapfrog_conserves_energy_and_is_reversible(x64):
    x, p = jnp.array([0.5, 0.3]), jnp.array([-1.0, 0.7])
    x1, p1 = leapfrog(x, p, 0.05, 40)
    energy = lambda x, p: -log_density(x) + 0.5 * p @ p  # noqa: E731
    assert abs(float(energy(x1, p1) - energy(x, p))) < 1e-2
    x2, p2 = leapfrog(x1, -p1, 0.05, 40)
    np.testing.assert_allclose(x2, x, atol=1e-10)
    np.testing.assert_allclose(-p2, p, atol=1e-10)


def test_matches_jax(x64):
    ours = main(3, 300)
    theirs = run_on_jax(sys.modules[__name__], "main", 3, 300)
    # Ember's keys give JAX's random bits, so the chains are the same draw for draw.
    np.testing.assert_allclose(ours["samples"], theirs["samples"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours["acceptance"], theirs["acceptance"], rtol=1e-6)


def test_acceptance_rate_has_jax_dtype(x64):
    ours = main(3, 20)
    theirs = run_on_jax(sys.modules[__name__], "main", 3, 20)
    assert ours["acceptance"].dtype == theirs["acceptance"].dtype
