"""Newton's method and BFGS on the Rosenbrock function, written as a JAX program:
Newton steps from jax.hessian and jnp.linalg.solve inside a jax.lax.while_loop, and
jax.scipy.optimize.minimize(method="BFGS"), both under jit. Only the imports say Ember;
the test runs the same code on JAX and compares."""
import sys

import numpy as np
import scipy.optimize
from swap_to_jax import run_on_jax

import ember as jax
import ember.numpy as jnp
from ember.scipy.optimize import minimize


def rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


@jax.jit
def newton(x0, tol=1e-10, max_steps=50):
    grad, hess = jax.grad(rosenbrock), jax.hessian(rosenbrock)

    def not_done(state):
        _, step, count = state
        return (jnp.linalg.norm(step) > tol) & (count < max_steps)

    def newton_step(state):
        x, _, count = state
        step = jnp.linalg.solve(hess(x), grad(x))
        return x - step, step, count + 1

    x, _, count = jax.lax.while_loop(not_done, newton_step, (x0, jnp.ones_like(x0), 0))
    return x, count


@jax.jit
def bfgs(x0):
    return minimize(rosenbrock, x0, method="BFGS")


def main(x0):
    x_newton, newton_steps = newton(x0)
    result = bfgs(x0)
    return {"newton_x": x_newton, "newton_steps": newton_steps, "bfgs_x": result.x,
            "bfgs_success": result.success, "bfgs_nit": result.nit, "bfgs_fun": result.fun,
            "bfgs_jac": result.jac}


STARTS = {"classic": np.array([-1.2, 1.0]), "zeros": np.zeros(3),
          "near_jax": np.array([2.0, 2.0])}


def test_newton_and_bfgs_find_the_minimum(x64):
    for name, x0 in STARTS.items():
        out = main(x0)
        np.testing.assert_allclose(out["newton_x"], np.ones_like(x0), atol=1e-10, err_msg=name)
        assert int(out["newton_steps"]) < 30
        assert bool(out["bfgs_success"]), name
        reference = scipy.optimize.minimize(scipy.optimize.rosen, x0, method="BFGS",
                                            jac=scipy.optimize.rosen_der)
        np.testing.assert_allclose(out["bfgs_x"], reference.x, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(out["bfgs_x"], np.ones_like(x0), atol=1e-5, err_msg=name)
        assert np.abs(np.asarray(out["bfgs_jac"])).max() < 1e-5
        # Newton's quadratic convergence takes far fewer steps than BFGS's superlinear one.
        assert int(out["newton_steps"]) < int(out["bfgs_nit"])


def test_matches_jax(x64):
    ours = main(STARTS["near_jax"])
    theirs = run_on_jax(sys.modules[__name__], "main", STARTS["near_jax"])
    np.testing.assert_allclose(ours["newton_x"], theirs["newton_x"], rtol=1e-12)
    assert int(ours["newton_steps"]) == int(theirs["newton_steps"])
    assert bool(ours["bfgs_success"]) and bool(theirs["bfgs_success"])
    np.testing.assert_allclose(ours["bfgs_x"], theirs["bfgs_x"], atol=1e-6)
