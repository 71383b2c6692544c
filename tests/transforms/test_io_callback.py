"""``ember.experimental.io_callback``: impure host calls, as JAX's."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.experimental import io_callback
from tests.conftest import BACKENDS


def _logging_double(log, ordered=False):
    def f(x):
        return io_callback(lambda v: log.append(float(np.sum(v))) or v * 2,
                           ember.ShapeDtypeStruct(np.shape(x), np.float32), x, ordered=ordered)
    return f


@pytest.mark.parametrize("backend", BACKENDS)
def test_runs_at_every_call_even_unused(backend):
    log = []
    f = _logging_double(log)
    g = ember.jit(lambda x: (f(x), f(x), x + 1.0)[2], backend=backend)  # results unused
    assert float(g(jnp.asarray(1.0))) == 2.0
    assert float(g(jnp.asarray(5.0))) == 6.0
    assert log == [1.0, 1.0, 5.0, 5.0]  # never dropped, never merged
    assert float(ember.jit(f, backend=backend)(jnp.asarray(3.0))) == 6.0


def test_vmap_once_per_element_and_ordered_refused():
    log = []
    out = ember.vmap(_logging_double(log))(jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])
    assert log == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="ordered"):
        ember.vmap(_logging_double(log, ordered=True))(jnp.arange(3.0))


def test_not_differentiable():
    with pytest.raises(ValueError, match="not differentiable"):
        ember.grad(_logging_double([]))(1.0)


def test_matches_jax():
    jax = pytest.importorskip("jax")
    from jax.experimental import io_callback as jax_io_callback

    def build(api, callback, log):
        return lambda x: callback(lambda v: log.append(float(np.sum(v))) or np.asarray(v) * 2,
                                  api.ShapeDtypeStruct((), np.float32), x)

    ours_log, theirs_log = [], []
    ours = ember.jit(ember.vmap(build(ember, io_callback, ours_log)))(np.arange(3.0, dtype=np.float32))
    theirs = jax.jit(jax.vmap(build(jax, jax_io_callback, theirs_log)))(np.arange(3.0, dtype=np.float32))
    jax.effects_barrier()
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
    assert ours_log == theirs_log
