"""A JAX program run on Ember with only its imports changed: iterative LQR (iLQR)
swinging a pendulum up, written in JAX's everyday control style: ``lax.scan`` for the
rollouts and the backward Riccati pass (reversed), ``lax.fori_loop`` for the outer
iterations, namedtuples as carries, ``jacfwd`` / ``hessian`` for the local models and
``vmap`` over line-search step sizes. Where JAX is installed the same code runs on JAX
and the results are compared.

``program`` is the JAX program verbatim; ``import jax; import jax.numpy as jnp`` becomes
``import ember as jax; import ember.numpy as jnp``.
"""
from collections import namedtuple

import numpy as np
import pytest

HORIZON, DT = 40, 0.1
ITERATIONS = 12
Derivatives = namedtuple("Derivatives", "f_x f_u l_x l_u l_xx l_uu l_ux")
ValueCarry = namedtuple("ValueCarry", "v_x v_xx")
Gains = namedtuple("Gains", "k K")
Solution = namedtuple("Solution", "us xs cost")


def program(jax, jnp):
    lax = jax.lax
    goal = jnp.array([jnp.pi, 0.0])

    def dynamics(x, u):
        theta, omega = x
        omega_dot = -9.81 * jnp.sin(theta) - 0.1 * omega + u[0]
        return jnp.array([theta + DT * omega, omega + DT * omega_dot])

    def running_cost(x, u):
        return 0.05 * jnp.sum(u ** 2) + 0.1 * jnp.sum((x - goal) ** 2)

    def final_cost(x):
        return 100.0 * jnp.sum((x - goal) ** 2)

    def rollout(x0, us):
        def step(x, u):
            x_next = dynamics(x, u)
            return x_next, x_next
        _, xs = lax.scan(step, x0, us)
        return jnp.concatenate([x0[None], xs])

    def total_cost(xs, us):
        return jnp.sum(jax.vmap(running_cost)(xs[:-1], us)) + final_cost(xs[-1])

    def derivatives(xs, us):
        f_x, f_u = jax.vmap(jax.jacfwd(dynamics, argnums=(0, 1)))(xs[:-1], us)
        l_x, l_u = jax.vmap(jax.grad(running_cost, argnums=(0, 1)))(xs[:-1], us)
        (l_xx, _), (l_ux, l_uu) = jax.vmap(jax.hessian(running_cost, argnums=(0, 1)))(
            xs[:-1], us)
        return Derivatives(f_x, f_u, l_x, l_u, l_xx, l_uu, l_ux)

    def backward_pass(xs, us, regularization=1e-3):
        d = derivatives(xs, us)
        terminal = ValueCarry(jax.grad(final_cost)(xs[-1]), jax.hessian(final_cost)(xs[-1]))

        def step(value, t):
            f_x, f_u, l_x, l_u, l_xx, l_uu, l_ux = t
            q_x = l_x + f_x.T @ value.v_x
            q_u = l_u + f_u.T @ value.v_x
            q_xx = l_xx + f_x.T @ value.v_xx @ f_x
            q_uu = l_uu + f_u.T @ value.v_xx @ f_u + regularization * jnp.eye(us.shape[1])
            q_ux = l_ux + f_u.T @ value.v_xx @ f_x
            k = -jnp.linalg.solve(q_uu, q_u)
            K = -jnp.linalg.solve(q_uu, q_ux)
            v_x = q_x + K.T @ q_uu @ k + K.T @ q_u + q_ux.T @ k
            v_xx = q_xx + K.T @ q_uu @ K + K.T @ q_ux + q_ux.T @ K
            return ValueCarry(v_x, 0.5 * (v_xx + v_xx.T)), Gains(k, K)

        _, gains = lax.scan(step, terminal, d, reverse=True)
        return gains

    def forward_pass(xs, us, gains, alpha):
        def step(x, t):
            x_ref, u_ref, k, K = t
            u = u_ref + alpha * k + K @ (x - x_ref)
            return dynamics(x, u), u
        _, new_us = lax.scan(step, xs[0], (xs[:-1], us, gains.k, gains.K))
        new_xs = rollout(xs[0], new_us)
        return Solution(new_us, new_xs, total_cost(new_xs, new_us))

    alphas = 0.5 ** jnp.arange(8.0)

    def iteration(i, solution):
        gains = backward_pass(solution.xs, solution.us)
        trials = jax.vmap(lambda a: forward_pass(solution.xs, solution.us, gains, a))(alphas)
        best = jnp.argmin(trials.cost)
        better = trials.cost[best] < solution.cost
        return jax.tree_util.tree_map(lambda new, old: jnp.where(better, new[best], old),
                                      trials, solution)

    @jax.jit
    def solve(x0, us):
        xs = rollout(x0, us)
        start = Solution(us, xs, total_cost(xs, us))
        return start.cost, lax.fori_loop(0, ITERATIONS, iteration, start)

    x0 = jnp.zeros(2)
    us = jnp.zeros((HORIZON, 1))
    first_cost, solution = solve(x0, us)
    return float(first_cost), np.asarray(solution.xs), np.asarray(solution.us), float(
        solution.cost)


def numpy_cost(xs, us):
    goal = np.array([np.pi, 0.0])
    running = 0.05 * np.sum(us ** 2) + 0.1 * np.sum((xs[:-1] - goal) ** 2)
    return running + 100.0 * np.sum((xs[-1] - goal) ** 2)


def numpy_rollout(us):
    xs = [np.zeros(2)]
    for u in us:
        theta, omega = xs[-1]
        omega_dot = -9.81 * np.sin(theta) - 0.1 * omega + u[0]
        xs.append(np.array([theta + DT * omega, omega + DT * omega_dot]))
    return np.array(xs)


@pytest.fixture(scope="module")
def ember_run():
    import ember as jax
    import ember.numpy as jnp

    return program(jax, jnp)


def test_ilqr_swings_the_pendulum_up(ember_run):
    first_cost, xs, us, cost = ember_run
    assert xs.shape == (HORIZON + 1, 2) and us.shape == (HORIZON, 1)
    # The controls really drive the pendulum there: replay them in NumPy.
    np.testing.assert_allclose(numpy_rollout(us), xs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(numpy_cost(xs, us), cost, rtol=1e-4)
    assert abs(xs[-1, 0] - np.pi) < 0.1 and abs(xs[-1, 1]) < 0.3
    assert cost < 0.1 * first_cost  # from 1026 to about 52; the swing itself costs most


def test_the_same_program_on_jax_finds_the_same_swing(ember_run):
    jax = pytest.importorskip("jax")
    import jax.numpy as jax_numpy

    first_cost, xs, us, cost = ember_run
    jax_first, jax_xs, jax_us, jax_cost = program(jax, jax_numpy)
    np.testing.assert_allclose(first_cost, jax_first, rtol=1e-5)
    np.testing.assert_allclose(cost, jax_cost, rtol=1e-2)
    np.testing.assert_allclose(xs, jax_xs, atol=0.05)
