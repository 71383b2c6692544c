"""A Kalman filter written as a JAX program: the predict/update recursion in a
jax.lax.scan whose carry is a namedtuple (mean, covariance, log-likelihood), tracking a
constant-velocity target, under jit. Only the imports say Ember; the test compares it
with the same filter in NumPy and runs the same code on JAX."""
import sys
from collections import namedtuple

import numpy as np
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp

DT = 0.1
F = np.array([[1.0, DT], [0.0, 1.0]])
H = np.array([[1.0, 0.0]])
Q = 0.01 * np.array([[DT ** 3 / 3, DT ** 2 / 2], [DT ** 2 / 2, DT]])
R = np.array([[0.25]])

Belief = namedtuple("Belief", "mean cov log_likelihood")


def kalman_step(belief, y):
    mean = F @ belief.mean
    cov = F @ belief.cov @ F.T + Q
    innovation = y - H @ mean
    s = H @ cov @ H.T + R
    gain = jnp.linalg.solve(s, H @ cov).T
    mean = mean + gain @ innovation
    cov = (jnp.eye(2) - gain @ H) @ cov
    log_likelihood = belief.log_likelihood - 0.5 * (
        innovation @ jnp.linalg.solve(s, innovation) + jnp.linalg.slogdet(s)[1]
        + jnp.log(2 * jnp.pi))
    return Belief(mean, cov, log_likelihood), (mean, jnp.diagonal(cov))


@jax.jit
def kalman_filter(ys, mean0, cov0):
    final, (means, variances) = jax.lax.scan(kalman_step, Belief(mean0, cov0, 0.0), ys)
    return means, variances, final.log_likelihood


def main(ys, mean0, cov0):
    means, variances, log_likelihood = kalman_filter(ys, mean0, cov0)
    return {"means": means, "variances": variances, "log_likelihood": log_likelihood}


def kalman_numpy(ys, mean, cov):
    means, log_likelihood = [], 0.0
    for y in ys:
        mean, cov = F @ mean, F @ cov @ F.T + Q
        innovation, s = y - H @ mean, H @ cov @ H.T + R
        gain = cov @ H.T @ np.linalg.inv(s)
        mean, cov = mean + gain @ innovation, (np.eye(2) - gain @ H) @ cov
        log_likelihood -= 0.5 * (innovation @ np.linalg.inv(s) @ innovation
                                 + np.log(np.linalg.det(s)) + np.log(2 * np.pi))
        means.append(mean)
    return np.array(means), log_likelihood


def track(seed=0, steps=200):
    rng = np.random.default_rng(seed)
    states = [np.array([0.0, 1.0])]
    for _ in range(steps - 1):
        states.append(F @ states[-1] + rng.multivariate_normal(np.zeros(2), Q))
    states = np.array(states)
    ys = states @ H.T + np.sqrt(R[0, 0]) * rng.standard_normal((steps, 1))
    return states, ys, np.zeros(2), np.eye(2)


def test_filter_matches_numpy_and_tracks(x64):
    states, ys, mean0, cov0 = track()
    out = main(ys, mean0, cov0)
    means, log_likelihood = kalman_numpy(ys, mean0, cov0)
    np.testing.assert_allclose(out["means"], means, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["log_likelihood"], log_likelihood, rtol=1e-10)
    # Filtering beats the raw measurements at estimating the position.
    filtered = np.sqrt(np.mean((np.asarray(out["means"])[50:, 0] - states[50:, 0]) ** 2))
    raw = np.sqrt(np.mean((ys[50:, 0] - states[50:, 0]) ** 2))
    assert filtered < 0.6 * raw
    assert np.all(np.asarray(out["variances"]) > 0)


def test_matches_jax(x64):
    _, ys, mean0, cov0 = track(seed=1)
    ours = main(ys, mean0, cov0)
    theirs = run_on_jax(sys.modules[__name__], "main", ys, mean0, cov0)
    for key in ours:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-10, atol=1e-12, err_msg=key)
