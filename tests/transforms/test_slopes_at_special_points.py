"""Derivatives where a function has a kink, a tie, a pole or an infinity, with JAX's
conventions: ``|x|`` has the positive side's slope at 0 (1) and -1 at NaN; ``logaddexp``
splits its slope between equal arguments and gives two +inf a slope of 1 each, so
softplus and log_sigmoid have slope 1/2 at 0; ``remainder`` has slope 1 where it is 0;
``logit`` and ``entr`` are infinite at their ends, not NaN. Each case holds the value JAX
gives (and is checked against JAX itself where it is installed), through ``grad`` and
``jit(grad)``. ``i0`` at 0 differs from JAX on purpose (I0'(0) = I1(0) = 0; JAX's 1
comes from differentiating ``exp(|x|) * i0e(x)``); so do points not listed where JAX's
value is not the limit, e.g. ``ndtri`` at 0 and 1 (Ember inf, JAX 0)."""
import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.special as special
import ember.scipy.stats as stats
from ember import nn

INF, NAN = math.inf, math.nan

# (name, function, arguments, slope with respect to each argument)
CASES = [
    ("abs", jnp.abs, (0.0,), (1.0,)),
    ("abs", jnp.abs, (-0.0,), (1.0,)),
    ("abs", jnp.abs, (-2.0,), (-1.0,)),
    ("abs", jnp.abs, (NAN,), (-1.0,)),
    ("fabs", jnp.fabs, (0.0,), (1.0,)),
    ("softplus", nn.softplus, (0.0,), (0.5,)),
    ("log_sigmoid", nn.log_sigmoid, (0.0,), (0.5,)),
    ("soft_sign", nn.soft_sign, (0.0,), (1.0,)),
    ("logaddexp", jnp.logaddexp, (0.0, 0.0), (0.5, 0.5)),
    ("logaddexp", jnp.logaddexp, (-1.0, -1.0), (0.5, 0.5)),
    ("logaddexp", jnp.logaddexp, (INF, INF), (1.0, 1.0)),
    ("logaddexp", jnp.logaddexp, (2.0, -INF), (1.0, 0.0)),
    ("logaddexp2", jnp.logaddexp2, (1.0, 1.0), (0.5, 0.5)),
    ("logaddexp2", jnp.logaddexp2, (INF, INF), (1.0, 1.0)),
    ("hypot", jnp.hypot, (0.0, 0.0), (0.5, 0.5)),
    ("copysign", lambda x: jnp.copysign(x, -1.0), (0.0,), (-1.0,)),
    ("modf", lambda x: jnp.modf(x)[0], (-0.0,), (1.0,)),
    ("modf", lambda x: jnp.modf(x)[0], (-2.5,), (1.0,)),
    ("laplace.logpdf", lambda x: stats.laplace.logpdf(x, 1.0, 2.0), (1.0,), (-0.5,)),
    ("laplace.cdf", stats.laplace.cdf, (0.0,), (0.5,)),
    ("norm inf", lambda x: jnp.linalg.norm(jnp.stack([x, 2 * x]), jnp.inf), (0.0,), (0.75,)),
    ("norm 1", lambda x: jnp.linalg.norm(jnp.stack([x, 2 * x]), 1), (0.0,), (3.0,)),
    ("remainder", jnp.remainder, (0.0, 1.5), (1.0, 0.0)),
    ("remainder", jnp.remainder, (-3.0, 1.5), (1.0, 2.0)),
    ("remainder", jnp.remainder, (-2.0, 1.5), (1.0, 2.0)),
    ("logit", special.logit, (0.0,), (INF,)),
    ("logit", special.logit, (1.0,), (INF,)),
    ("logit", special.logit, (INF,), (0.0,)),
    ("logit", special.logit, (0.5,), (4.0,)),
    ("entr", special.entr, (0.0,), (INF,)),
    ("entr", special.entr, (1.0,), (-1.0,)),
    ("entr", special.entr, (INF,), (-INF,)),
    ("i1", special.i1, (0.0,), (0.5,)),
]
DIFFERS_FROM_JAX = [("i0", special.i0, (0.0,), (0.0,))]


def _ids(cases):
    return [f"{name}{args}" for name, _, args, _ in cases]


def _slopes(grad, function, args):
    arguments = tuple(range(len(args)))
    return tuple(float(g) for g in grad(function, argnums=arguments)(*args))


@pytest.mark.parametrize("jitted", [False, True], ids=["grad", "jit(grad)"])
@pytest.mark.parametrize("name, function, args, expected", CASES + DIFFERS_FROM_JAX,
                         ids=_ids(CASES + DIFFERS_FROM_JAX))
def test_the_slope_is_jax_s(name, function, args, expected, jitted):
    def grad(f, argnums):
        slopes = ember.grad(f, argnums=argnums)
        return ember.jit(slopes) if jitted else slopes

    np.testing.assert_array_equal(_slopes(grad, function, args), expected)


@pytest.mark.parametrize("name, function, args, expected", CASES, ids=_ids(CASES))
def test_jax_gives_the_same_slope(name, function, args, expected):
    jax = pytest.importorskip("jax")
    jax_function = {"abs": jax.numpy.abs, "fabs": jax.numpy.fabs,
                    "softplus": jax.nn.softplus, "log_sigmoid": jax.nn.log_sigmoid,
                    "soft_sign": jax.nn.soft_sign, "logaddexp": jax.numpy.logaddexp,
                    "logaddexp2": jax.numpy.logaddexp2, "hypot": jax.numpy.hypot,
                    "copysign": lambda x: jax.numpy.copysign(x, -1.0),
                    "modf": lambda x: jax.numpy.modf(x)[0],
                    "laplace.logpdf": lambda x: jax.scipy.stats.laplace.logpdf(x, 1.0, 2.0),
                    "laplace.cdf": jax.scipy.stats.laplace.cdf,
                    "norm inf": lambda x: jax.numpy.linalg.norm(
                        jax.numpy.stack([x, 2 * x]), jax.numpy.inf),
                    "norm 1": lambda x: jax.numpy.linalg.norm(jax.numpy.stack([x, 2 * x]), 1),
                    "remainder": jax.numpy.remainder, "logit": jax.scipy.special.logit,
                    "entr": jax.scipy.special.entr, "i1": jax.scipy.special.i1}[name]
    np.testing.assert_array_equal(_slopes(jax.grad, jax_function, args), expected)


def test_i0_s_slope_is_i1():
    x = np.array([-3.0, -0.5, 0.0, 0.25, 4.0], np.float32)
    slopes = ember.vmap(ember.grad(special.i0))(x)
    np.testing.assert_allclose(slopes, special.i1(x), rtol=1e-6, atol=1e-7)


def test_the_inf_norm_of_an_empty_vector_is_0_as_jax_s():
    assert float(jnp.linalg.norm(jnp.zeros((0,)), jnp.inf)) == 0.0
