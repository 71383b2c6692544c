"""Errors of the kinds JAX raises, so ``except`` clauses written for JAX carry over."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors


def _leak():
    leaked = []

    def store(x):
        leaked.append(x * 2)
        return x

    ember.jit(store)(np.ones(3, np.float32))
    return leaked[0]


def test_escaped_tracer_is_a_type_error():
    tracer = _leak()
    with pytest.raises(TypeError) as info:
        tracer + 1
    assert isinstance(info.value, errors.UnexpectedTracerError)
    message = str(info.value)
    assert "f32[3] (shape (3,), dtype float32)" in message  # the shape as users type it
    assert "test_errors_as_jax.py" in message  # the user's line
    assert "Return values from the transformed function" in message  # how to fix it


def test_escaped_tracer_matches_jax_error_type():
    jax = pytest.importorskip("jax")
    assert issubclass(errors.UnexpectedTracerError, TypeError)
    assert issubclass(jax.errors.UnexpectedTracerError, TypeError)
    leaked = []
    jax.jit(lambda x: leaked.append(x * 2) or x)(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        leaked[0] + 1
    with pytest.raises(TypeError):
        _leak() + 1


@pytest.mark.parametrize("jitted", [False, True])
def test_failed_reshape_names_both_sizes(jitted):
    fn = (lambda x: ember.lax.reshape(x, (4, 2)))
    fn = ember.jit(fn) if jitted else fn
    with pytest.raises(TypeError, match=r"shape \(6,\) \(size 6\) into shape \(4, 2\) \(size 8\)"):
        fn(jnp.arange(6.0))
    with pytest.raises(ValueError):  # NumPy's habit keeps working
        fn(jnp.arange(6.0))


def test_failed_reshape_type_as_jax():
    jnp_jax = pytest.importorskip("jax.numpy")
    with pytest.raises(TypeError, match=r"\(size 6\) into shape \(4, 2\) \(size 8\)"):
        jnp_jax.arange(6.0).reshape(4, 2)


def test_concretization_message_uses_tuple_shapes():
    def branch(x):
        return x if x.sum() > 0 else -x

    with pytest.raises(errors.ConcretizationTypeError, match=r"bool\[\] \(shape \(\), dtype bool\)"):
        ember.jit(branch)(np.ones((2, 3), np.float32))


def test_compiled_signature_mismatch_uses_tuple_shapes():
    compiled = ember.jit(lambda x: x + 1).lower(np.ones(3, np.float32)).compile()
    with pytest.raises(TypeError, match=r"shape \(3,\).*shape \(4,\)"):
        compiled(np.ones(4, np.float32))


@pytest.mark.parametrize("jitted", [False, True])
def test_failed_numpy_reshape_names_both_sizes(jitted):
    fn = (lambda x: jnp.reshape(x, (4, 2)))
    fn = ember.jit(fn) if jitted else fn
    with pytest.raises(TypeError, match=r"shape \(6,\) \(size 6\) into shape \(4, 2\) \(size 8\)"):
        fn(jnp.arange(6.0))
    with pytest.raises(ValueError, match=r"\(size 6\) into shape \(4, -1\)"):
        jnp.arange(6.0).reshape(4, -1)
