"""lax.custom_root and lax.custom_linear_solve (values and implicit derivatives, forward
and reverse, against closed forms, finite differences and JAX where installed),
closure_convert and lax.platform_dependent."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads

A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
SKEW = np.array([[0.0, 0.7, 0.0], [0.0, 0.0, -0.4], [0.3, 0.0, 0.0]])


def _programs(np_, lax_):
    """Programs written once for Ember and JAX: name -> (function, arguments)."""

    def newton(g, x0):  # a solver that is not differentiable (a loop of Newton steps)
        return lax_.fori_loop(0, 30, lambda i, x: x - g(x) / (2.0 * x), x0)

    def cube_root(a):
        return lax_.custom_root(lambda x: x ** 2 - a * np_.sin(a), 1.0, newton,
                                lambda g, y: y / g(1.0))

    def conjugate_gradient(matvec, b):  # a while_loop: only transpose_solve differentiates it
        def step(state):
            x, r, p, k = state
            ap = matvec(p)
            alpha = (r @ r) / (p @ ap)
            x, r_new = x + alpha * p, r - alpha * ap
            return x, r_new, r_new + (r_new @ r_new) / (r @ r) * p, k + 1

        x0 = np_.zeros_like(b)
        return lax_.while_loop(lambda s: (s[3] < 20) & (s[1] @ s[1] > 1e-20), step,
                               (x0, b, b, 0))[0]

    def spd_solve(scale, b):
        matrix = np_.asarray(A) * scale
        return lax_.custom_linear_solve(lambda v: matrix @ v, b, conjugate_gradient,
                                        symmetric=True)

    def general_solve(scale, b):
        matrix = np_.asarray(A) + scale * np_.asarray(SKEW)
        return lax_.custom_linear_solve(
            lambda v: matrix @ v, b, lambda mv, r: np_.linalg.solve(matrix, r),
            transpose_solve=lambda vm, r: np_.linalg.solve(matrix.T, r))

    b = np.array([1.0, -2.0, 0.5])
    return {"custom_root": (cube_root, (1.3,)), "symmetric solve": (spd_solve, (1.5, b)),
            "general solve": (general_solve, (0.8, b))}


PROGRAMS = _programs(jnp, lax)


def _solve_reference(name, *args):
    if name == "custom_root":
        a = args[0]
        return np.sqrt(a * np.sin(a))
    scale, b = args
    matrix = A * scale if name == "symmetric solve" else A + scale * SKEW
    return np.linalg.solve(matrix, b)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_values_and_derivatives(name, x64):
    fun, args = PROGRAMS[name]
    np.testing.assert_allclose(fun(*args), _solve_reference(name, *args), rtol=1e-10)
    np.testing.assert_allclose(ember.jit(fun)(*args), _solve_reference(name, *args),
                               rtol=1e-10)
    # The solvers are loops: these derivatives exist only through the implicit rules.
    check_grads(fun, args, order=1, modes=("fwd", "rev"), rtol=1e-6, eps=1e-6)


def test_implicit_derivative_is_the_closed_form(x64):
    fun, (a,) = PROGRAMS["custom_root"]
    expected = (np.sin(a) + a * np.cos(a)) / (2 * np.sqrt(a * np.sin(a)))
    np.testing.assert_allclose(ember.grad(fun)(a), expected, rtol=1e-10)
    np.testing.assert_allclose(ember.jit(ember.grad(fun))(a), expected, rtol=1e-10)
    np.testing.assert_allclose(ember.vmap(ember.grad(fun))(jnp.asarray([a, 2.0])),
                               [expected, (np.sin(2) + 2 * np.cos(2)) / (2 * np.sqrt(2 *
                                                                       np.sin(2)))],
                               rtol=1e-10)
    fun, (scale, b) = PROGRAMS["general solve"]
    x = np.linalg.solve(A + scale * SKEW, b)
    np.testing.assert_allclose(ember.jacrev(fun, argnums=1)(scale, b),
                               np.linalg.inv(A + scale * SKEW), rtol=1e-10)
    np.testing.assert_allclose(ember.jacfwd(fun, argnums=0)(scale, b),
                               -np.linalg.solve(A + scale * SKEW, SKEW @ x), rtol=1e-10)


def test_a_vmap_inside_the_derivative(x64):
    for name in ("symmetric solve", "general solve"):
        fun, (scale, b) = PROGRAMS[name]
        rows = np.stack([b, 2 * b[::-1]])
        mapped = ember.grad(lambda s: ember.vmap(lambda r: fun(s, r))(rows).sum())(scale)
        looped = ember.grad(lambda s: sum(fun(s, r).sum() for r in rows))(scale)
        np.testing.assert_allclose(mapped, looped, rtol=1e-12)
        np.testing.assert_allclose(
            ember.jacrev(lambda r: ember.vmap(lambda x: fun(scale, x))(r))(rows),
            ember.jacrev(lambda r: jnp.stack([fun(scale, x) for x in r]))(rows), rtol=1e-12)


def test_answers_as_jax(x64):
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        theirs = _programs(jax.numpy, jax.lax)
        for name, (fun, args) in PROGRAMS.items():
            for transform_ours, transform_theirs in ((lambda f: f, lambda f: f),
                                                     (ember.jacrev, jax.jacrev),
                                                     (ember.jacfwd, jax.jacfwd)):
                np.testing.assert_allclose(transform_ours(fun)(*args),
                                           transform_theirs(theirs[name][0])(*args),
                                           rtol=1e-9, err_msg=name)


def test_reverse_mode_without_transpose_solve_says_what_to_pass():
    b = jnp.ones(3)
    fun = lambda s: lax.custom_linear_solve(  # noqa: E731
        lambda v: A.astype(np.float32) * s @ v, b,
        lambda mv, r: jnp.linalg.solve(A.astype(np.float32) * s, r)).sum()
    np.testing.assert_allclose(ember.jvp(fun, (1.0,), (1.0,))[1],
                               -np.linalg.solve(A, b).sum(), rtol=1e-5)
    with pytest.raises(TypeError, match="needs transpose_solve="):
        ember.grad(fun)(1.0)
    with pytest.raises(NotImplementedError, match="has_aux"):
        lax.custom_root(lambda x: x, 1.0, lambda f, x: x, lambda g, y: y, has_aux=True)


def test_closure_convert_lifts_the_traced_floats_only():
    offset = np.float32(1.0)

    def converted_sum(w):
        fun, consts = ember.closure_convert(lambda x: x * w + offset + jnp.arange(2), 1.0)
        assert len(consts) == 1  # w (traced); offset and the integer arange stay inside
        return fun(3.0, *consts).sum()

    assert ember.grad(converted_sum)(2.0) == 6.0
    fun, consts = ember.closure_convert(lambda x: x * 2.0, 1.0)
    assert consts == [] and fun(4.0) == 8.0
    with pytest.raises(TypeError, match="structured as"):
        fun((1.0, 2.0))


def test_platform_dependent():
    platform = ember.default_backend()
    cpu_like = "cpu" if platform == "reference" else platform
    branches = {cpu_like: lambda x: x * 2, "tpu": lambda x: x * 100}
    assert lax.platform_dependent(3.0, **branches) == 6.0
    assert ember.jit(lambda x: lax.platform_dependent(x, **branches))(3.0) == 6.0
    assert lax.platform_dependent(3.0, tpu=lambda x: x, default=lambda x: x - 1) == 2.0
    with pytest.raises(ValueError, match="no branch for platform"):
        lax.platform_dependent(3.0, tpu=lambda x: x)
