"""Loops run natively on the CPU (control.py + launcher.c): scan and while_loop call
their compiled body from C, the carries swapped with the body's outputs (or staged,
when a body returns an input or one value twice) between iterations; against the
reference backend, with odd and even numbers of iterations, and checked to have taken
the native path (or the Python one, for a body with a host call)."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_testing import assert_matches_reference, requires_cpu

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import control, launcher

pytestmark = requires_cpu

rng = np.random.default_rng(4)
x = rng.standard_normal((5, 3)).astype(np.float32)
w = rng.standard_normal((3, 3)).astype(np.float32)


@pytest.fixture
def native_calls(monkeypatch):
    """Counts calls of the native loops (the launcher is built first)."""
    loops = launcher.launcher() and launcher.ready_loops()
    if loops is None:
        pytest.skip("the launcher cannot be built here (no Python headers)")
    calls = {"scan": 0, "while": 0}

    class Counting:
        def scan(self, *args):
            calls["scan"] += 1
            return loops.scan(*args)

        def while_(self, *args):
            calls["while"] += 1
            return loops.while_(*args)

    monkeypatch.setattr(control, "ready_loops", Counting)
    return calls


def rnn(x, w):
    def step(h, row):
        h = jnp.tanh(h @ w + row)
        return h, h.sum()
    return lax.scan(step, jnp.zeros(3, np.float32), x)


def rnn_reversed(x, w):
    return lax.scan(lambda h, row: (h * 0.5 + row, h), jnp.ones(3, np.float32), x,
                    reverse=True)


def swapping_carries(x, w):
    # carries returned as other carries (staged, not overwritten), one unchanged, one a
    # literal
    def step(carry, _):
        a, b, c, d = carry
        return (b, a @ w, c, jnp.float32(2.0)), a.sum()
    return lax.scan(step, (x[0], x[1], x[2], jnp.float32(0.0)), None, length=5)


def carry_also_scanned_out(x, w):
    # the same value as the new carry and as the output of the step (one buffer for both)
    def step(h, row):
        h = jnp.tanh(h @ w + row)
        return h, h
    return lax.scan(step, jnp.zeros(3, np.float32), x[:4])  # an even number of steps


def fori(x, w):
    return lax.fori_loop(0, 7, lambda i, h: jnp.tanh(h @ w) + i, x)


def empty_scan(x, w):
    return lax.scan(lambda h, row: (h + row, h), x[0], x[:0])


@pytest.mark.parametrize("fun", [rnn, rnn_reversed, swapping_carries, carry_also_scanned_out,
                                 fori, empty_scan])
def test_scans_run_natively(native_calls, fun):
    assert_matches_reference(fun, x, w, tolerance=(1e-5, 1e-5))
    assert native_calls["scan"] >= 1


def newton_sqrt(x, w):
    def cond(state):
        i, guess = state
        return (i < 20) & (jnp.max(jnp.abs(guess * guess - x)) > 1e-6)

    def body(state):
        i, guess = state
        return i + 1, 0.5 * (guess + x / guess)
    return lax.while_loop(cond, body, (0, jnp.ones_like(x)))


def never_runs(x, w):
    return lax.while_loop(lambda h: jnp.sum(h) > 1e9, lambda h: h @ w, x[:3])


@pytest.mark.parametrize("fun", [newton_sqrt, never_runs])
def test_while_loops_run_natively(native_calls, fun):
    positive = np.abs(x) + 0.5
    assert_matches_reference(fun, positive, w, tolerance=(1e-5, 1e-5))
    assert native_calls["while"] >= 1


def test_a_body_with_a_host_call_loops_in_python(native_calls):
    def fun(x, w):
        return lax.fori_loop(0, 3, lambda i, h: lax.cumlogsumexp(h, 1) * 0.1, x)

    assert_matches_reference(fun, x, w, tolerance=(1e-5, 1e-5))
    assert native_calls == {"scan": 0, "while": 0}


def test_gradient_through_a_native_scan(native_calls):
    grad = ember.grad(lambda x, w: rnn(x, w)[1].sum(), argnums=1)
    assert_matches_reference(grad, x, w, tolerance=(1e-4, 1e-5))
    assert native_calls["scan"] >= 2  # forward and backward through time
