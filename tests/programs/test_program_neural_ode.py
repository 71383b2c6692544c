"""A neural-ODE-style program written in JAX: a fixed-step RK4 integrator in a
jax.lax.fori_loop, differentiated end to end with jax.grad to fit the parameters of a
linear vector field to a trajectory, under jit. Checked against the analytic solution
x(t) = expm(A t) x0 of the linear ODE; only the imports say Ember, and the test runs the
same code on JAX."""
import sys

import numpy as np
import scipy.linalg
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp

T_END, STEPS = 2.0, 100
A_TRUE = np.array([[-0.5, 2.0], [-2.0, -0.5]])
X0 = np.array([1.0, 0.0])
TIMES = np.linspace(0.0, T_END, 5)[1:]


def vector_field(params, x):
    return params @ x


def rk4(params, x0, t_end, steps=STEPS):
    h = t_end / steps

    def step(_, x):
        k1 = vector_field(params, x)
        k2 = vector_field(params, x + 0.5 * h * k1)
        k3 = vector_field(params, x + 0.5 * h * k2)
        k4 = vector_field(params, x + h * k3)
        return x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)

    return jax.lax.fori_loop(0, steps, step, x0)


def trajectory(params, x0, times):
    return jax.vmap(lambda t: rk4(params, x0, t))(times)


def loss(params, x0, times, targets):
    return jnp.mean((trajectory(params, x0, times) - targets) ** 2)


@jax.jit
def fit(params, x0, times, targets, learning_rate=2.0, iterations=300):
    value_and_grad = jax.value_and_grad(loss)

    def step(params, _):
        value, grad = value_and_grad(params, x0, times, targets)
        return params - learning_rate * grad, value

    return jax.lax.scan(step, params, None, length=iterations)


def main(times, targets):
    final = jax.jit(rk4)(jnp.asarray(A_TRUE), jnp.asarray(X0), T_END)
    grad = jax.grad(loss)(jnp.zeros((2, 2)), X0, times, targets)
    params, losses = fit(jnp.array([[-0.3, 1.5], [-1.5, -0.3]]), X0, times, targets)
    return {"final": final, "grad": grad, "params": params, "losses": losses}


def analytic(params, x0, times):
    return np.stack([scipy.linalg.expm(params * t) @ x0 for t in times])


def numerical_grad(params, targets, eps=1e-6):
    grad = np.zeros_like(params)
    for index in np.ndindex(*params.shape):
        bump = np.zeros_like(params)
        bump[index] = eps
        plus = float(loss(jnp.asarray(params + bump), X0, TIMES, targets))
        minus = float(loss(jnp.asarray(params - bump), X0, TIMES, targets))
        grad[index] = (plus - minus) / (2 * eps)
    return grad


def test_rk4_solves_the_linear_ode_and_recovers_its_matrix(x64):
    targets = analytic(A_TRUE, X0, TIMES)
    out = main(TIMES, targets)
    np.testing.assert_allclose(out["final"], analytic(A_TRUE, X0, [T_END])[0], atol=1e-7)
    np.testing.assert_allclose(out["grad"], numerical_grad(np.zeros((2, 2)), targets),
                               rtol=1e-6, atol=1e-9)
    losses = np.asarray(out["losses"])
    assert losses[-1] < 1e-9 * losses[0]
    np.testing.assert_allclose(out["params"], A_TRUE, atol=1e-4)


def test_matches_jax(x64):
    targets = analytic(A_TRUE, X0, TIMES)
    ours = main(TIMES, targets)
    theirs = run_on_jax(sys.modules[__name__], "main", TIMES, targets)
    for key in ours:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-9, atol=1e-12, err_msg=key)
