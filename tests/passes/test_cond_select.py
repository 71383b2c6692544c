"""Cheap conds become selects (passes/cond_select.py): which conds, and that every backend
present still computes what the reference does, untaken branches included (a division
by zero there, an index out of range)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.ir.graph import all_eqns
from ember.config import config
from ember.passes.cond_select import select_small_conds
from ember.passes.pipeline import run_pipeline
from ember.runtime.devices import available_backends

NATIVE = [name for name in ("cpu", "opencl") if name in available_backends()]


def prims(graph) -> set[str]:
    return {eqn.prim.name for eqn in all_eqns(graph)}


def decaying(x):
    def body(i, c):
        c = jnp.tanh(c) * 0.5 + 0.1
        return lax.cond(i % 3 == 0, lambda c: c * 0.9, lambda c: c - 0.01, c)
    return lax.fori_loop(0, 10, body, x)


def three_way(index, x):
    return lax.switch(index, [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: -x], x)


def safe_divide(n, d):
    return lax.cond(d != 0, lambda: n // d, lambda: jnp.int32(-7))


def big(x):
    return lax.cond(x[0] > 0, lambda x: jnp.exp(x), lambda x: x, x)


def with_a_loop(x):
    return lax.cond(x[0] > 0, lambda x: lax.fori_loop(0, 3, lambda i, y: y * 2.0, x),
                    lambda x: x, x)


x = np.linspace(-1, 1, 16, dtype=np.float32)


@pytest.mark.parametrize("fun, args, converted", [
    (decaying, (x,), True),
    (three_way, (np.int32(1), x), True),
    (big, (np.ones(200_000, np.float32),), False),  # too costly to compute both
    (with_a_loop, (x,), False),
])
def test_which_conds_become_selects(fun, args, converted):
    graph = ember.make_graph(fun)(*args)
    assert "cond" in prims(graph)
    assert ("cond" not in prims(select_small_conds(graph))) == converted


def test_nothing_changes_under_debug_nans():
    graph = ember.make_graph(decaying)(x)
    with config.override(debug_nans=True):
        assert "cond" in prims(run_pipeline(graph, "cpu"))


@pytest.mark.parametrize("backend", NATIVE)
@pytest.mark.parametrize("fun, args", [
    (decaying, (x,)),
    *[(three_way, (np.int32(i), x)) for i in (-5, 0, 1, 2, 9)],  # clamped into range
    *[(safe_divide, (np.int32(7), np.int32(d))) for d in (0, 2, -1)],
])
def test_selects_compute_what_the_reference_does(backend, fun, args):
    got = ember.jit(fun, backend=backend)(*args)
    want = ember.jit(fun, backend="reference")(*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


@pytest.mark.skipif("cpu" not in available_backends(), reason="no C compiler")
def test_a_loop_with_a_small_cond_has_no_host_step_left_but_the_loop():
    kernels = ember.jit(decaying, backend="cpu").lower(x).compile().kernels
    assert [k.ops for k in kernels if k.kind == "host"] == [["scan"]]
    body = ember.make_graph(decaying)(x)
    assert "cond" not in prims(run_pipeline(body, "cpu"))


@pytest.mark.skipif("cpu" not in available_backends(), reason="no C compiler")
def test_gradient_through_converted_conds():
    def loss(x):
        return jnp.sum(decaying(x) ** 2)

    got = ember.jit(ember.grad(loss), backend="cpu")(x)
    want = ember.jit(ember.grad(loss), backend="reference")(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
