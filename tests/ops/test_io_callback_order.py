"""io_callback(ordered=True) inside jit: the calls run in program order on every backend,
also where data dependencies alone would allow another order, inside scan and cond
bodies, and in a compiled program called again."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.experimental import io_callback


def _recorder(log: list, tag: str):
    def callback(x):
        log.append((tag, float(np.sum(x))))
        return np.asarray(x, np.float32)
    return callback


def _spec(value):
    return ember.ShapeDtypeStruct(value.shape, value.dtype)


def _independent_calls(log: list):
    """``a`` waits on a long chain of kernels; ``b`` and ``c`` need only the input, so a
    scheduler going by data alone could run them first."""
    def f(x):
        y = jnp.tanh(x @ x.T).sum(0) * 3.0
        a = io_callback(_recorder(log, "a"), _spec(y), y, ordered=True)
        b = io_callback(_recorder(log, "b"), _spec(x[0]), x[0], ordered=True)
        c = io_callback(_recorder(log, "c"), _spec(x[1]), x[1] * 2.0, ordered=True)
        d = io_callback(_recorder(log, "d"), _spec(a), jnp.exp(a) + b.sum(), ordered=True)
        return d + c.sum()
    return f


def test_calls_run_in_program_order_on_every_backend(backend):
    log: list = []
    compiled = ember.jit(_independent_calls(log))
    x = np.random.default_rng(0).random((4, 4)).astype(np.float32)
    for _ in range(2):  # a first call (compiles) and a second (cached program)
        log.clear()
        compiled(x)
        assert [tag for tag, _ in log] == ["a", "b", "c", "d"]


def test_order_through_scan_and_cond(backend):
    log: list = []

    def f(x):
        def body(carry, i):
            io_callback(_recorder(log, "body"), _spec(carry), carry, ordered=True)
            return carry + 1.0, i

        io_callback(_recorder(log, "before"), _spec(x), x, ordered=True)
        total, _ = lax.scan(body, x.sum(), jnp.arange(3))
        r = lax.cond(total > 0, lambda v: io_callback(_recorder(log, "cond"), _spec(v), v,
                                                      ordered=True), lambda v: v, total)
        io_callback(_recorder(log, "after"), _spec(r), r, ordered=True)
        return r

    ember.jit(f)(np.ones(2, np.float32))
    assert log == [("before", 2.0), ("body", 2.0), ("body", 3.0), ("body", 4.0),
                   ("cond", 5.0), ("after", 5.0)]


def test_same_order_as_jax():
    jax = pytest.importorskip("jax")
    from jax.experimental import io_callback as jax_io_callback

    def program(callback, np_like, log):
        def f(x):
            y = np_like.tanh(x @ x.T).sum(0)
            a = callback(_recorder(log, "a"), jax.ShapeDtypeStruct(y.shape, y.dtype), y,
                         ordered=True)
            b = callback(_recorder(log, "b"), jax.ShapeDtypeStruct(x[0].shape, x.dtype),
                         x[0], ordered=True)
            return a + b
        return f

    x = np.random.default_rng(1).random((3, 3)).astype(np.float32)
    ours: list = []
    theirs: list = []
    ember.jit(program(io_callback, jnp, ours))(x)
    jax.jit(program(jax_io_callback, jax.numpy, theirs))(x)
    assert [t for t, _ in ours] == [t for t, _ in theirs] == ["a", "b"]
    np.testing.assert_allclose([v for _, v in ours], [v for _, v in theirs], rtol=1e-5)
