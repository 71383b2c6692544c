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


def _nested(ck, np_):
    """A checkified function calling another's error with check_error (for Ember and JAX)."""
    def inner(x):
        ck.check(x > 0, "inner: {}", x)
        return np_.log(x)

    def outer(x):
        err, y = ck.checkify(inner, errors=ck.all_checks)(x)
        ck.check_error(err)
        ck.check(y < 1, "outer: {}", y)
        return y

    def debugged(x):
        ck.debug_check(x > 0, "debug: {}", x)
        return x * 2

    return inner, outer, debugged


INNER, OUTER, DEBUGGED = _nested(checkify, jnp)


@pytest.mark.parametrize("jitted", [False, True])
def test_check_error_joins_the_checks_of_another_checkified_function(jitted):
    checked = checkify.checkify(OUTER)
    checked = ember.jit(checked) if jitted else checked
    messages = [checked(np.float32(v))[0].get() for v in (-1.0, 5.0, 1.0)]
    assert messages == ["inner: -1.0 (`check` failed)",
                        "outer: 1.6094379425048828 (`check` failed)", None]


def test_check_error_outside_checkify_raises_or_is_an_error():
    with pytest.raises(checkify.JaxRuntimeError, match=r"inner: -2.0"):
        checkify.check_error(checkify.checkify(INNER)(np.float32(-2.0))[0])
    checkify.check_error(checkify.init_error)  # nothing failed
    assert checkify.init_error.get() is None
    with pytest.raises(ValueError, match="outside checkify"):
        ember.jit(lambda x: checkify.check_error(checkify.checkify(INNER)(x)[0]))(1.0)
    with pytest.raises(TypeError, match="checkify.Error"):
        checkify.check_error("not an error")


def test_check_error_of_a_vmapped_error_reports_its_last_failure():
    err, _ = ember.vmap(checkify.checkify(INNER))(jnp.asarray([1.0, -1.0, -2.0]))
    joined, _ = checkify.checkify(lambda: checkify.check_error(err))()
    assert joined.get() == "inner: -2.0 (`check` failed)"


def test_debug_check_runs_only_inside_checkify():
    x = np.float32(-1.0)
    assert float(DEBUGGED(x)) == -2.0 and float(ember.jit(DEBUGGED)(x)) == -2.0
    assert checkify.checkify(DEBUGGED)(x)[0].get() == "debug: -1.0 (`check` failed)"


def test_check_error_and_debug_check_as_jax():
    jax = pytest.importorskip("jax")
    from jax.experimental import checkify as jax_checkify

    _, outer, debugged = _nested(jax_checkify, jax.numpy)
    for value in (-1.0, 5.0, 1.0):
        x = np.float32(value)
        assert checkify.checkify(OUTER)(x)[0].get() == \
            jax_checkify.checkify(outer)(jax.numpy.asarray(x))[0].get()
    x = jax.numpy.asarray(np.float32(-3.0))
    assert checkify.checkify(DEBUGGED)(np.float32(-3.0))[0].get() == \
        jax_checkify.checkify(debugged)(x)[0].get()
    inner = _nested(jax_checkify, jax.numpy)[0]
    err = jax.vmap(jax_checkify.checkify(inner))(jax.numpy.asarray([1.0, -1.0, -2.0]))[0]
    theirs = jax_checkify.checkify(lambda: jax_checkify.check_error(err))()[0].get()
    err = ember.vmap(checkify.checkify(INNER))(jnp.asarray([1.0, -1.0, -2.0]))[0]
    assert checkify.checkify(lambda: checkify.check_error(err))()[0].get() == theirs
