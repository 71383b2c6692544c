"""Control flow: forward semantics, staging (not unrolled), errors, and transformations."""
import numpy as np
import pytest

import ember
from ember import lax
from ember.errors import EmberTypeError, EmberValueError


def _count(graph, name):
    return sum(eqn.prim.name == name for eqn in graph.eqns)


X = np.arange(1, 5, dtype=np.float32)


# --- forward --------------------------------------------------------------------------

@pytest.mark.parametrize("pred", [True, False])
def test_cond_eager_and_jit(pred):
    f = lambda p, x: lax.cond(p, lambda v: v * 2.0, lambda v: v - 1.0, x)
    expected = X * 2 if pred else X - 1
    np.testing.assert_allclose(np.asarray(f(pred, X)), expected)
    np.testing.assert_allclose(np.asarray(ember.jit(f)(pred, X)), expected)


def test_cond_is_staged_once_not_unrolled():
    graph = ember.make_graph(lambda p, x: lax.cond(p, lambda v: v * 2.0, lambda v: v, x))(True, X)
    assert _count(graph, "cond") == 1


def test_switch_clamps_index():
    branches = [lambda v: v, lambda v: v + 1.0, lambda v: v + 2.0]
    assert float(lax.switch(-5, branches, np.float32(0))) == 0.0
    assert float(lax.switch(7, branches, np.float32(0))) == 2.0
    assert float(ember.jit(lambda i: lax.switch(i, branches, np.float32(0)))(1)) == 1.0


def test_cond_captures_closure_values():
    w = np.float32(3.0)
    out = ember.jit(lambda p, x: lax.cond(p, lambda v: v * w, lambda v: v, x))(True, X)
    np.testing.assert_allclose(np.asarray(out), X * 3)


def test_cond_branch_mismatch_names_both():
    with pytest.raises(EmberTypeError, match=r"branch 0 returns .*f32\[\].*branch 1 returns .*f32\[4\]"):
        lax.cond(True, lambda v: v, lambda v: lax.reduce_sum(v, (0,)), X)


def test_while_loop():
    out = ember.jit(lambda x: lax.while_loop(lambda v: lax.reduce_max(v, (0,)) < 50.0,
                                             lambda v: v * 2.0, x))(X)
    np.testing.assert_allclose(np.asarray(out), X * 16)


def test_while_carry_type_change_is_clear():
    with pytest.raises(EmberTypeError, match="same structure, shapes and dtypes"):
        lax.while_loop(lambda v: True, lambda v: lax.convert_element_type(v, np.int32), X)


def test_while_cond_must_be_bool_scalar():
    with pytest.raises(EmberTypeError, match="bool scalar"):
        lax.while_loop(lambda v: v, lambda v: v, X)


def test_fori_loop_static_and_traced_bounds():
    body = lambda i, v: v + lax.convert_element_type(i, np.float32)
    assert float(lax.fori_loop(0, 5, body, np.float32(0))) == 10.0
    assert float(ember.jit(lambda n: lax.fori_loop(0, n, body, np.float32(0)))(5)) == 10.0


def test_scan_matches_python_loop():
    def step(c, x):
        c = c * 0.5 + x
        return c, c * 2.0

    carry, ys = ember.jit(lambda xs: lax.scan(step, np.float32(0), xs))(X)
    c, expect = np.float32(0), []
    for x in X:
        c = c * 0.5 + x
        expect.append(c * 2)
    np.testing.assert_allclose(float(carry), c)
    np.testing.assert_allclose(np.asarray(ys), expect)


def test_scan_reverse_and_length_without_xs():
    _, ys = lax.scan(lambda c, x: (c + x, c), np.float32(0), X, reverse=True)
    np.testing.assert_allclose(np.asarray(ys), [9, 7, 4, 0])
    carry, none = lax.scan(lambda c, _: (c + 1.0, None), np.float32(0), None, length=3)
    assert float(carry) == 3.0 and none is None


def test_scan_length_mismatch_is_clear():
    with pytest.raises(EmberValueError, match="one length"):
        lax.scan(lambda c, x: (c, x), np.float32(0), (X, np.ones(3, np.float32)))


def test_map():
    np.testing.assert_allclose(np.asarray(lax.map(lambda v: v * v, X)), X * X)


# --- transformations ------------------------------------------------------------------

import ember.numpy as jnp  # noqa: E402
from ember.test_util import check_grads, check_vmap  # noqa: E402

XD = np.linspace(0.3, 1.2, 4)


def _rnn(w, xs):
    def step(h, x):
        h = jnp.tanh(w * h + x)
        return h, h * h

    h, ys = lax.scan(step, 0.5, xs)
    return h + jnp.sum(ys)


def test_scan_gradients_both_modes_second_order(x64):
    check_grads(_rnn, (0.3, XD), order=2)


def test_scan_reverse_gradients(x64):
    def f(w, xs):
        carry, ys = lax.scan(lambda c, x: (c * w + x, jnp.sin(c)), 0.1, xs, reverse=True)
        return carry + jnp.sum(ys * ys)

    check_grads(f, (0.7, XD), order=1)


def test_scan_grad_does_not_stack_loop_constants(x64):
    """A matrix used in every step is saved once for the backward pass, not per step."""
    w = np.eye(3) * 0.5
    xs = np.ones((6, 3))

    def f(w, xs):
        h, _ = lax.scan(lambda h, x: (jnp.tanh(w @ h + x), None), jnp.zeros(3), xs)
        return jnp.sum(h)

    graph = ember.make_graph(ember.grad(f))(w, xs)
    forward_scan = next(e for e in graph.eqns if e.prim.name == "scan")
    stacked = [v.aval.shape for v in forward_scan.outputs]
    assert (6, 3, 3) not in stacked


@pytest.mark.parametrize("pred", [True, False])
def test_cond_gradients(pred, x64):
    f = lambda x: lax.cond(pred, lambda v: jnp.sum(jnp.sin(v) * v), lambda v: jnp.sum(v ** 3), x)
    check_grads(f, (XD,), order=2)


def test_switch_gradient_with_closure(x64):
    w = 1.5

    def f(x, i):
        return lax.switch(i, [lambda v: v * w, lambda v: jnp.exp(v), lambda v: v * v], x)

    for i in range(3):
        check_grads(lambda x: jnp.sum(f(x, i)), (XD,), order=1)


def test_fori_loop_gradient(x64):
    check_grads(lambda x: lax.fori_loop(0, 4, lambda i, v: jnp.sin(v) * x, x), (0.8,), order=2)


def test_while_loop_forward_mode(x64):
    f = lambda x: lax.while_loop(lambda v: v < 10.0, lambda v: v * x, x)
    check_grads(f, (3.0,), order=1, modes=("fwd",))
    _, tangent = ember.jvp(f, (3.0,), (1.0,))
    assert float(tangent) == pytest.approx(27.0)  # f(x) = x**3 here


def test_while_loop_reverse_mode_explains():
    f = lambda x: lax.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x)
    with pytest.raises(TypeError, match="fori_loop with Python-int bounds, or scan"):
        ember.grad(f)(3.0)


def test_vmap_cond_with_batched_predicate_is_select():
    f = lambda x: lax.cond(x > 2, lambda v: v * 10.0, lambda v: -v, x)
    check_vmap(f, (X,))
    graph = ember.make_graph(ember.vmap(f))(X)
    assert _count(graph, "cond") == 0 and _count(graph, "select_n") == 1


def test_vmap_cond_with_unbatched_predicate_stays_cond():
    f = lambda p, x: lax.cond(p, lambda v: v * 10.0, lambda v: -v, x)
    graph = ember.make_graph(ember.vmap(f, in_axes=(None, 0)))(True, X)
    assert _count(graph, "cond") == 1


def test_vmap_while_runs_until_every_lane_is_done():
    f = lambda x: lax.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x)
    check_vmap(f, (X,))


def test_vmap_scan_against_loop():
    def f(c0, xs):
        return lax.scan(lambda c, x: (c * 0.5 + x, c * x), c0, xs)

    check_vmap(f, (X, np.arange(12, dtype=np.float32).reshape(4, 3)), in_axes=(0, 0))
    check_vmap(f, (X, np.arange(3, dtype=np.float32)), in_axes=(0, None))


def test_compositions_jit_vmap_grad_scan(x64):
    per_example = ember.jit(ember.vmap(ember.grad(_rnn), in_axes=(0, None)))
    ws = np.array([0.1, 0.3, 0.5])
    expected = [float(ember.grad(_rnn)(w, XD)) for w in ws]
    np.testing.assert_allclose(np.asarray(per_example(ws, XD)), expected, rtol=1e-10)


def test_grad_of_vmap_of_cond(x64):
    f = lambda x: jnp.sum(ember.vmap(lambda v: lax.cond(v > 0.5, jnp.sin, jnp.cos, v))(x))
    check_grads(f, (XD,), order=1)


def test_jvp_of_while_inside_jit(x64):
    f = ember.jit(lambda x, t: ember.jvp(
        lambda v: lax.while_loop(lambda c: c < 10.0, lambda c: c * v, v), (x,), (t,)))
    primal, tangent = f(3.0, 1.0)
    assert float(primal) == 27.0 and float(tangent) == pytest.approx(27.0)
