"""Gaussian process regression, written as a JAX program: an RBF kernel, the log
marginal likelihood through a Cholesky factor (jax.scipy.linalg.cho_factor / cho_solve),
its hyperparameters fitted by gradient ascent, then the posterior mean and variance.
Only the imports say Ember; the test runs the same code on JAX and compares."""
import sys

import numpy as np
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp
from ember.scipy.linalg import cho_factor, cho_solve


def rbf_kernel(x1, x2, log_amplitude, log_length):
    sq_dist = (x1[:, None] - x2[None, :]) ** 2
    return jnp.exp(2 * log_amplitude) * jnp.exp(-0.5 * sq_dist / jnp.exp(2 * log_length))


def log_marginal_likelihood(params, x, y):
    k = rbf_kernel(x, x, params["log_amplitude"], params["log_length"])
    k = k + (jnp.exp(2 * params["log_noise"]) + 1e-8) * jnp.eye(x.shape[0])
    factor = cho_factor(k, lower=True)
    alpha = cho_solve(factor, y)
    log_det = 2 * jnp.sum(jnp.log(jnp.diag(factor[0])))
    return -0.5 * y @ alpha - 0.5 * log_det - 0.5 * x.shape[0] * jnp.log(2 * jnp.pi)


def predict(params, x, y, x_test):
    k = rbf_kernel(x, x, params["log_amplitude"], params["log_length"])
    k = k + jnp.exp(2 * params["log_noise"]) * jnp.eye(x.shape[0])
    k_star = rbf_kernel(x_test, x, params["log_amplitude"], params["log_length"])
    factor = cho_factor(k, lower=True)
    mean = k_star @ cho_solve(factor, y)
    prior_var = jnp.exp(2 * params["log_amplitude"])
    var = prior_var - jnp.sum(k_star * cho_solve(factor, k_star.T).T, axis=1)
    return mean, var


@jax.jit
def update(params, x, y, learning_rate=0.01):
    value, grads = jax.value_and_grad(log_marginal_likelihood)(params, x, y)
    params = jax.tree_util.tree_map(lambda p, g: p + learning_rate * g, params, grads)
    return params, value


def data():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-3, 3, 40))
    y = np.sin(2 * x) + 0.1 * rng.normal(size=40)
    return x, y


def main(steps=300):
    x, y = data()
    params = {"log_amplitude": jnp.array(0.0), "log_length": jnp.array(0.0),
              "log_noise": jnp.array(-1.0)}
    initial_value = log_marginal_likelihood(params, x, y)
    initial_grads = jax.grad(log_marginal_likelihood)(params, x, y)
    for _ in range(steps):
        params, _ = update(params, x, y)
    x_test = jnp.linspace(-2.5, 2.5, 11)
    mean, var = predict(params, x, y, x_test)
    return {"initial_value": initial_value, "initial_grads": initial_grads, "params": params,
            "final_value": log_marginal_likelihood(params, x, y), "mean": mean, "var": var}


def _numpy_log_marginal_likelihood(params, x, y):
    amplitude2, length2, noise2 = (np.exp(2 * params[k]) for k in
                                   ("log_amplitude", "log_length", "log_noise"))
    k = amplitude2 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / length2)
    k += (noise2 + 1e-8) * np.eye(len(x))
    _, log_det = np.linalg.slogdet(k)
    return -0.5 * y @ np.linalg.solve(k, y) - 0.5 * log_det - 0.5 * len(x) * np.log(2 * np.pi)


def _numpy_posterior(params, x, y, x_test):
    amplitude2, length2, noise2 = (np.exp(2 * params[k]) for k in
                                   ("log_amplitude", "log_length", "log_noise"))

    def kernel(a, b):
        return amplitude2 * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / length2)

    k = kernel(x, x) + noise2 * np.eye(len(x))
    k_star = kernel(x_test, x)
    mean = k_star @ np.linalg.solve(k, y)
    var = amplitude2 - np.einsum("ij,ji->i", k_star, np.linalg.solve(k, k_star.T))
    return mean, var


def test_gp_regression_fits_and_matches_numpy(x64):
    x, y = data()
    out = main()
    start = {"log_amplitude": 0.0, "log_length": 0.0, "log_noise": -1.0}
    np.testing.assert_allclose(out["initial_value"], _numpy_log_marginal_likelihood(start, x, y),
                               rtol=1e-10)
    for name, value in start.items():  # the gradient against central differences
        bumped = [dict(start, **{name: value + h}) for h in (1e-6, -1e-6)]
        numeric = (_numpy_log_marginal_likelihood(bumped[0], x, y)
                   - _numpy_log_marginal_likelihood(bumped[1], x, y)) / 2e-6
        np.testing.assert_allclose(out["initial_grads"][name], numeric, rtol=1e-6)
    fitted = {k: float(v) for k, v in out["params"].items()}
    assert float(out["final_value"]) > float(out["initial_value"]) + 10
    np.testing.assert_allclose(out["final_value"], _numpy_log_marginal_likelihood(fitted, x, y),
                               rtol=1e-10)
    assert 0.05 < np.exp(fitted["log_noise"]) < 0.2  # the data's noise is 0.1
    x_test = np.linspace(-2.5, 2.5, 11)
    mean, var = _numpy_posterior(fitted, x, y, x_test)
    np.testing.assert_allclose(out["mean"], mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(out["var"], var, rtol=1e-6, atol=1e-10)
    # The fit recovers the function behind the noise (40 points, noise 0.1).
    np.testing.assert_allclose(out["mean"], np.sin(2 * x_test), atol=0.25)
    assert np.abs(np.asarray(out["mean"]) - np.sin(2 * x_test)).mean() < 0.1
    assert (np.asarray(out["var"]) > 0).all() and (np.asarray(out["var"]) < 0.05).all()


def test_gp_regression_matches_jax(x64):
    ours = main(steps=100)
    theirs = run_on_jax(sys.modules[__name__], "main", 100)
    for key in ("initial_value", "final_value", "mean", "var"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-8, atol=1e-10, err_msg=key)
    for name in ours["params"]:
        np.testing.assert_allclose(ours["params"][name], theirs["params"][name], rtol=1e-8)
        np.testing.assert_allclose(ours["initial_grads"][name], theirs["initial_grads"][name],
                                   rtol=1e-8)
