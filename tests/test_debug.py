"""``ember.debug``: print / callback / breakpoint at run time, under every transformation."""
from __future__ import annotations

import io

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.conftest import BACKENDS


def _show(x):
    ember.debug.print("x = {x}, total {}", x.sum(), x=x)
    return x * 2.0


def test_print_eagerly_formats_as_python(capsys):
    _show(jnp.arange(3.0))
    assert capsys.readouterr().out == "x = [0. 1. 2.], total 3.0\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_under_jit_prints_at_every_run(backend, capsys):
    f = ember.jit(_show, backend=backend)
    out = f(jnp.arange(3.0))
    f(jnp.ones(3))
    ember.effects_barrier()  # (nothing to wait for: callbacks run during the call)
    np.testing.assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])
    assert capsys.readouterr().out == "x = [0. 1. 2.], total 3.0\nx = [1. 1. 1.], total 3.0\n"


def test_print_kept_though_nothing_uses_it(capsys):
    @ember.jit
    def f(x):
        ember.debug.print("first {}", x)
        ember.debug.print("first {}", x)  # the same print twice: printed twice
        ember.debug.print("constant")
        return x

    f(jnp.asarray(1.0))
    assert capsys.readouterr().out == "first 1.0\nfirst 1.0\nconstant\n"


def test_print_format_spec_and_indexing(capsys):
    ember.jit(lambda x: ember.debug.print("{x[1]:.2f}|{0:>5}", 7, x=x))(jnp.arange(3.0))
    assert capsys.readouterr().out == "1.00|    7\n"


def test_print_under_vmap_once_per_element(capsys):
    ember.vmap(_show)(jnp.arange(6.0).reshape(2, 3))
    assert capsys.readouterr().out == "x = [0. 1. 2.], total 3.0\nx = [3. 4. 5.], total 12.0\n"
    ember.jit(ember.vmap(_show, in_axes=1))(jnp.arange(4.0).reshape(2, 2))
    assert capsys.readouterr().out == "x = [0. 2.], total 2.0\nx = [1. 3.], total 4.0\n"


def test_nested_vmap_runs_outer_major(capsys):
    ember.vmap(ember.vmap(lambda v: ember.debug.print("{}", v)))(jnp.arange(4.0).reshape(2, 2))
    assert capsys.readouterr().out.split() == ["0.0", "1.0", "2.0", "3.0"]


def test_print_under_grad_sees_primals(capsys):
    g = ember.grad(lambda x: _show(x).sum())
    np.testing.assert_allclose(np.asarray(g(jnp.arange(3.0))), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(np.asarray(ember.jit(g)(jnp.arange(3.0))), [2.0, 2.0, 2.0])
    assert capsys.readouterr().out == "x = [0. 1. 2.], total 3.0\n" * 2


def test_print_in_loops_and_branches(capsys):
    def body(i, carry):
        ember.debug.print("step {} carry {}", i, carry)
        return carry * 2.0

    out = ember.jit(lambda x: ember.lax.fori_loop(0, 3, body, x))(jnp.asarray(1.0))
    assert float(out) == 8.0
    assert capsys.readouterr().out == "step 0 carry 1.0\nstep 1 carry 2.0\nstep 2 carry 4.0\n"

    def branch(x):
        def loud(x):
            ember.debug.print("positive {}", x)
            return x
        return ember.lax.cond(x > 0, loud, lambda x: -x, x)

    f = ember.jit(branch)
    assert float(f(jnp.asarray(2.0))) == 2.0 and float(f(jnp.asarray(-3.0))) == 3.0
    assert capsys.readouterr().out == "positive 2.0\n"  # only the branch taken


def test_print_format_errors_at_the_call():
    with pytest.raises(IndexError, match="field"):
        ember.jit(lambda x: ember.debug.print("{} {}", x))(jnp.ones(2))
    with pytest.raises(KeyError, match="y"):
        ember.debug.print("{y}", x=1.0)


def test_callback_gets_values_and_pytrees():
    seen = []
    ember.jit(lambda tree: ember.debug.callback(lambda t, scale: seen.append((t, scale)),
                                                tree, scale=tree["b"] * 2))(
        {"a": jnp.arange(2.0), "b": jnp.asarray(3.0)})
    (tree, scale), = seen
    np.testing.assert_allclose(tree["a"], [0.0, 1.0])
    assert float(tree["b"]) == 3.0 and float(scale) == 6.0


def test_breakpoint_calls_the_hook_with_run_time_values(monkeypatch):
    stops = []
    monkeypatch.setattr(ember.debug, "breakpoint_hook",
                        lambda where, values: stops.append((where, values)))

    @ember.jit
    def f(x):
        y = jnp.sin(x)
        label = "inside"  # noqa: F841  (read by the breakpoint, through locals)
        ember.debug.breakpoint()
        return y + 1.0

    f(jnp.asarray([0.0, 1.0]))
    f(jnp.asarray([2.0, 3.0]))
    assert len(stops) == 2
    where, values = stops[1]
    assert "test_debug.py" in where and "(f)" in where
    np.testing.assert_allclose(values["y"], np.sin([2.0, 3.0]), rtol=1e-6)
    np.testing.assert_allclose(values["x"], [2.0, 3.0])
    assert values["label"] == "inside"


def test_breakpoint_without_terminal_goes_on(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", None)
    out = ember.jit(lambda x: (ember.debug.breakpoint(), x + 1.0)[1])(jnp.asarray(1.0))
    assert float(out) == 2.0
    assert "no terminal" in capsys.readouterr().out


class _Terminal(io.StringIO):
    """Typed commands, on what claims to be a terminal."""

    def isatty(self):
        return True


def test_breakpoint_on_a_terminal_opens_pdb_with_the_values(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", _Terminal("p float(y.sum())\np label\nc\n"))

    @ember.jit
    def f(x):
        y = x * 3.0
        label = "here"  # noqa: F841  (read by the breakpoint, through locals)
        ember.debug.breakpoint()
        return y

    assert float(f(jnp.asarray([1.0, 2.0])).sum()) == 9.0
    out = capsys.readouterr().out
    assert "ember.debug.breakpoint at" in out and "(Pdb)" in out
    assert "9.0" in out and "'here'" in out


def test_print_matches_jax(capsys):
    jax = pytest.importorskip("jax")

    def show(debug, x):
        debug.print("x = {x}, total {}, first {x[0]:.3f}", x.sum(), x=x)
        return x

    x = np.arange(3.0, dtype=np.float32)
    jax.jit(lambda x: show(jax.debug, x))(x)
    jax.effects_barrier()
    theirs = capsys.readouterr().out
    ember.jit(lambda x: show(ember.debug, x))(x)
    assert capsys.readouterr().out == theirs
    jax.vmap(lambda x: show(jax.debug, x))(x.reshape(3, 1))
    jax.effects_barrier()
    theirs = capsys.readouterr().out
    ember.vmap(lambda x: show(ember.debug, x))(x.reshape(3, 1))
    assert capsys.readouterr().out == theirs
