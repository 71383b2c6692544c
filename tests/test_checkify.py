"""``ember.experimental.checkify``: user checks reported at run time, as JAX's."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.experimental import checkify


def _reciprocal(x):
    checkify.check(x > 0, "{x} needs to be positive!", x=x)
    checkify.check(x < 10, "too big: {}", x)
    return 1.0 / x


@pytest.mark.parametrize("jitted", [False, True])
def test_failed_check_reports_its_run_time_values(jitted):
    checked = checkify.checkify(_reciprocal)
    checked = ember.jit(checked) if jitted else checked
    err, out = checked(jnp.asarray(-3.0))
    assert float(out) == pytest.approx(-1 / 3)
    assert err.get() == "-3.0 needs to be positive! (`check` failed)"
    with pytest.raises(checkify.JaxRuntimeError, match="needs to be positive"):
        err.throw()
    assert isinstance(err.get_exception(), ValueError)
    err, _ = checked(jnp.asarray(30.0))
    assert err.get() == "too big: 30.0 (`check` failed)"
    err, out = checked(jnp.asarray(4.0))
    assert err.get() is None and err.get_exception() is None
    err.throw()
    assert float(out) == 0.25


def test_one_compilation_serves_every_value():
    checked = ember.jit(checkify.checkify(_reciprocal))
    messages = [checked(jnp.asarray(v))[0].get() for v in (1.0, -1.0, 11.0)]
    assert messages == [None, "-1.0 needs to be positive! (`check` failed)",
                        "too big: 11.0 (`check` failed)"]
    assert checked._cache_size() == 1


def test_vmap_of_checkify_names_the_index():
    err, out = ember.vmap(checkify.checkify(_reciprocal))(jnp.asarray([1.0, -2.0, 3.0]))
    assert err.get() == "at mapped index 1: -2.0 needs to be positive! (`check` failed)"
    np.testing.assert_allclose(np.asarray(out), [1.0, -0.5, 1 / 3], rtol=1e-6)


def test_grad_inside_checkify():
    def loss(w):
        checkify.check(jnp.all(jnp.isfinite(w)), "non-finite weights")
        return (w ** 2).sum()

    err, g = checkify.checkify(ember.jit(ember.grad(lambda w: (w ** 3).sum())))(jnp.ones(2))
    assert err.get() is None
    err, value = ember.jit(checkify.checkify(loss))(jnp.asarray([1.0, jnp.inf]))
    assert err.get() == "non-finite weights (`check` failed)"


def test_outside_checkify():
    with pytest.raises(checkify.JaxRuntimeError, match="-1.0 needs to be positive"):
        _reciprocal(jnp.asarray(-1.0))
    with pytest.raises(ValueError, match="functionalized"):
        ember.jit(_reciprocal)(jnp.asarray(1.0))
    with pytest.raises(TypeError, match="scalar pred"):
        checkify.check(jnp.ones(2) > 0, "vector")


def test_checks_inside_an_inner_vmap_or_jit():
    xs = jnp.asarray([1.0, -2.0, 30.0, -4.0])
    err, out = checkify.checkify(ember.vmap(_reciprocal))(xs)
    # The first check fails first; of its failing elements, the last (as JAX reports).
    assert err.get() == "-4.0 needs to be positive! (`check` failed)"
    np.testing.assert_allclose(np.asarray(out), 1.0 / np.asarray(xs), rtol=1e-6)
    err, _ = checkify.checkify(ember.jit(ember.vmap(_reciprocal)))(jnp.asarray([1.0, 30.0]))
    assert err.get() == "too big: 30.0 (`check` failed)"


def test_unknown_error_types():
    with pytest.raises(ValueError, match="unknown error types"):
        checkify.checkify(_reciprocal, errors=frozenset({KeyError}))


def test_matches_jax():
    jax = pytest.importorskip("jax")
    from jax.experimental import checkify as jax_checkify

    def f(ck, x):
        ck.check(x > 0, "{x} needs to be positive!", x=x)
        return 1.0 / x

    for value in (2.0, -3.0):
        x = np.float32(value)
        ours = ember.jit(checkify.checkify(lambda x: f(checkify, x)))(x)[0].get()
        theirs = jax.jit(jax_checkify.checkify(lambda x: f(jax_checkify, x)))(x)[0].get()
        assert ours == theirs
    xs = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    ours = ember.vmap(checkify.checkify(lambda x: f(checkify, x)))(xs)[0].get()
    theirs = jax.vmap(jax_checkify.checkify(lambda x: f(jax_checkify, x)))(xs)[0].get()
    assert ours == theirs.splitlines()[0]  # JAX lists every failing index; Ember the first
    ours = checkify.checkify(ember.vmap(lambda x: f(checkify, x)))(xs)[0].get()
    theirs = jax_checkify.checkify(jax.vmap(lambda x: f(jax_checkify, x)))(
        jax.numpy.asarray(xs))[0].get()
    assert ours == theirs
