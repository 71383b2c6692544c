"""checkify inside ``custom_jvp`` / ``custom_vjp`` functions, with JAX's answers: the
body's checks are checked where the call runs (eagerly, jitted, vmapped), and under
differentiation inside ``checkify`` the rule's checks are (the rule is what runs)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.experimental import checkify

f32 = np.float32


def _functions(np_, custom_jvp, custom_vjp, ck):
    """``custom_jvp`` ``f`` and ``custom_vjp`` ``v``, written once for Ember and JAX."""

    @custom_jvp
    def f(x):
        ck.check(x > 0, "f: x must be positive, got {}", x)
        return np_.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), np_.cos(x) * t

    @custom_vjp
    def v(x):
        ck.check(x > 0, "v: x={}", x)
        return np_.sin(x)

    def v_fwd(x):
        ck.check(x < 10, "fwd: x={}", x)
        return np_.sin(x), x

    v.defvjp(v_fwd, lambda x, ct: (ct * np_.cos(x),))
    return f, v


F, V = _functions(jnp, ember.custom_jvp, ember.custom_vjp, checkify)


def _cases(f, v, grad, jit, vmap, np_):
    """name -> (function to checkify, argument)."""
    return {
        "custom_jvp fails": (lambda x: f(x) * 2.0, f32(-1)),
        "custom_jvp passes": (lambda x: f(x) * 2.0, f32(1)),
        "custom_jvp jitted inside": (jit(lambda x: f(x) + 1.0), f32(-2)),
        "custom_jvp differentiated inside": (grad(lambda x: f(x) * 3.0), f32(-1)),
        "custom_jvp in a vmap inside": (lambda x: vmap(f)(x).sum(), np.array([1, -3, -4], f32)),
        "custom_vjp fails": (v, f32(-1)),
        "custom_vjp passes": (v, f32(2)),
        "custom_vjp differentiated inside, fwd passes": (grad(v), f32(-1)),
        "custom_vjp differentiated inside, fwd fails": (grad(v), f32(11)),
        "a check before the call": (lambda x: f(v(x)), f32(-5)),
    }


EXPECTED = {
    "custom_jvp fails": "f: x must be positive, got -1.0 (`check` failed)",
    "custom_jvp passes": None,
    "custom_jvp jitted inside": "f: x must be positive, got -2.0 (`check` failed)",
    "custom_jvp differentiated inside": "f: x must be positive, got -1.0 (`check` failed)",
    "custom_jvp in a vmap inside": "f: x must be positive, got -4.0 (`check` failed)",
    "custom_vjp fails": "v: x=-1.0 (`check` failed)",
    "custom_vjp passes": None,
    # Differentiated, a custom_vjp function runs its fwd rule: those are the checks.
    "custom_vjp differentiated inside, fwd passes": None,
    "custom_vjp differentiated inside, fwd fails": "fwd: x=11.0 (`check` failed)",
    "a check before the call": "v: x=-5.0 (`check` failed)",
}
CASES = _cases(F, V, ember.grad, ember.jit, ember.vmap, jnp)


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_checks_inside_custom_functions(name, jitted):
    fun, arg = CASES[name]
    checked = checkify.checkify(fun)
    err, out = (ember.jit(checked) if jitted else checked)(arg)
    assert err.get() == EXPECTED[name]
    unchecked = _functions(jnp, ember.custom_jvp, ember.custom_vjp, _NoChecks)
    plain = _cases(*unchecked, ember.grad, ember.jit, ember.vmap, jnp)[name][0]
    np.testing.assert_allclose(np.asarray(out), np.asarray(plain(arg)), rtol=1e-6)


class _NoChecks:
    @staticmethod
    def check(*args, **kwargs):
        return None


def test_answers_as_jax():
    jax = pytest.importorskip("jax")
    from jax.experimental import checkify as jax_checkify

    theirs = _cases(*_functions(jax.numpy, jax.custom_jvp, jax.custom_vjp, jax_checkify),
                    jax.grad, jax.jit, jax.vmap, jax.numpy)
    for name, (fun, arg) in theirs.items():
        expected = jax_checkify.checkify(fun)(jax.numpy.asarray(arg))[0].get()
        assert expected == EXPECTED[name], name  # the table above is JAX's
        assert checkify.checkify(CASES[name][0])(arg)[0].get() == expected, name


def test_under_vmap_the_mapped_index_is_named():
    err, out = ember.vmap(checkify.checkify(F))(jnp.asarray([1.0, -2.0, 3.0]))
    assert err.get() == "at mapped index 1: f: x must be positive, got -2.0 (`check` failed)"
    np.testing.assert_allclose(np.asarray(out), np.sin([1.0, -2.0, 3.0]), rtol=1e-6)


@pytest.mark.parametrize("custom", ["jvp", "vjp"])
def test_differentiating_a_checkified_function_keeps_its_error(custom):
    """grad / jvp of checkify(f): the derivative is the custom rule's, and the error
    that of the body on the primal values (the rule's own checks are not added)."""
    fun = F if custom == "jvp" else V
    x = f32(-1.0)
    expected = EXPECTED[f"custom_{custom} fails"]
    for checked in (checkify.checkify(fun), ember.jit(checkify.checkify(fun))):
        (err, y), (_, dy) = ember.jvp(checked, (x,), (f32(1),)) if custom == "jvp" else \
            ((checked(x)), (None, ember.grad(lambda a: checked(a)[1])(x)))
        assert err.get() == expected
        np.testing.assert_allclose(np.asarray(y), np.sin(x), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(dy), np.cos(x), rtol=1e-6)
    value, grad = ember.value_and_grad(lambda a: checkify.checkify(fun)(a)[1] * 2.0)(x)
    np.testing.assert_allclose([value, grad], [2 * np.sin(x), 2 * np.cos(x)], rtol=1e-6)


def test_closed_over_values_are_checked_and_still_not_differentiable():
    def make(w):
        @ember.custom_jvp
        def scale(x):
            checkify.check(x < w, "x={} not below {}", x, w)
            return x * w

        scale.defjvp(lambda p, t: (scale(p[0]), t[0] * w))
        return scale

    err, y = ember.jit(checkify.checkify(make(f32(3.0))))(f32(5.0))
    assert err.get() == "x=5.0 not below 3.0 (`check` failed)" and float(y) == 15.0
    np.testing.assert_allclose(
        ember.grad(lambda x: checkify.checkify(make(f32(3.0)))(x)[1])(f32(5.0)), 3.0)
    with pytest.raises(TypeError, match="closes over"):
        ember.grad(lambda w: checkify.checkify(make(w))(f32(1.0))[1])(f32(3.0))


def test_automatic_checks_inside_a_custom_function():
    @ember.custom_jvp
    def log_of(x):
        return jnp.log(x)

    log_of.defjvp(lambda p, t: (log_of(p[0]), t[0] / p[0]))
    err, _ = checkify.checkify(lambda x: log_of(x) + 1.0, errors=checkify.nan_checks)(f32(-1))
    assert err.get().startswith("nan generated by primitive: log.")
    assert checkify.checkify(log_of, errors=checkify.nan_checks)(f32(2))[0].get() is None
