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
