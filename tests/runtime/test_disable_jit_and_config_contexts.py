"""``ember.disable_jit`` and JAX's config context managers (``enable_x64``,
``debug_nans``, ``log_compiles``)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.core.trace import Tracer


def _program(lib, lax_, seen):
    """One program for Ember and JAX; ``seen`` collects what each body was given."""
    def body(i, v):
        seen.append(v)
        return v * 1.5 + i

    def step(c, x):
        seen.append(x)
        return c + x, c * x

    @lib.jit
    def f(x):
        seen.append(x)
        y = lax_.fori_loop(0, 3, body, x)
        y = lax_.cond(y > 0, lambda v: (seen.append(v), v * 2.0)[1], lambda v: v, y)
        y = lax_.while_loop(lambda c: c < 100.0, lambda c: (seen.append(c), c * 3.0)[1], y)
        carry, ys = lax_.scan(step, y, lib.numpy.arange(3.0), reverse=True)
        return lax_.switch(1, [lambda a, b: a, lambda a, b: a + b.sum()], carry, ys)

    return f


def test_jit_and_control_flow_run_in_python_under_disable_jit():
    seen = []
    f = _program(ember, lax, seen)
    x = np.float32(1.0)
    compiled = float(f(x))
    assert any(isinstance(v, Tracer) for v in seen)  # staged and compiled
    seen.clear()
    with ember.disable_jit():
        eager = float(f(x))
    assert seen and not any(isinstance(v, Tracer) for v in seen)
    assert eager == pytest.approx(compiled, rel=1e-6)
    seen.clear()
    with ember.disable_jit(False):
        f(x)
    assert not seen  # compiled: the cache answers, nothing is traced


def test_disable_jit_stages_what_is_traced_anyway():
    with ember.disable_jit():
        grad = ember.grad(lambda x: lax.fori_loop(0, 3, lambda i, v: v * x, x))(2.0)
        mapped = ember.vmap(lambda x: lax.cond(x > 0, lambda v: v, lambda v: -v, x))(
            jnp.asarray([1.0, -2.0]))
        loop = ember.vmap(lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x))(
            jnp.asarray([1.0, 3.0]))
    assert float(grad) == 32.0
    np.testing.assert_array_equal(np.asarray(mapped), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(loop), [16.0, 12.0])


def test_disable_jit_as_jax():
    jax = pytest.importorskip("jax")
    ours, theirs = [], []
    with ember.disable_jit():
        ours_value = float(_program(ember, lax, ours)(np.float32(1.0)))
    with jax.disable_jit():
        theirs_value = float(_program(jax, jax.lax, theirs)(np.float32(1.0)))
    assert ours_value == pytest.approx(theirs_value, rel=1e-6)
    assert len(ours) == len(theirs)  # every body ran as often, in Python
    np.testing.assert_allclose([float(v) for v in ours], [float(v) for v in theirs], rtol=1e-6)


def test_config_context_managers():
    assert jnp.zeros(1).dtype == np.float32
    with ember.enable_x64():
        assert jnp.zeros(1).dtype == np.float64
        with ember.enable_x64(False):
            assert jnp.zeros(1).dtype == np.float32
    assert jnp.zeros(1).dtype == np.float32
    with ember.debug_nans():
        with pytest.raises(FloatingPointError):
            ember.jit(lambda x: jnp.log(x))(jnp.asarray(-1.0))
    assert not ember.config.debug_nans


def test_log_compiles_prints_each_compile(capsys):
    capsys.readouterr()
    with ember.log_compiles():
        ember.jit(lambda x: x * 2.0 + 1.0)(jnp.ones(3))
    assert "ember: compiled" in capsys.readouterr().out
    with ember.log_compiles(False):
        ember.jit(lambda x: x * 4.0 + 1.0)(jnp.ones(3))
    assert "ember: compiled" not in capsys.readouterr().out
    assert not ember.config.log_enabled("compile")


def test_jax_s_option_name():
    with ember.config.override(jax_disable_jit=True):
        assert ember.config.disable_jit
    assert not ember.config.disable_jit
