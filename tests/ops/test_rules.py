"""The rule contract: coverage of the registry, rule makers, partial evaluation and
transposition as building blocks, and check_grads itself."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.random  # noqa: F401  (registers its primitives)
from ember import lax
from ember.core.abstract import ShapedArray
from ember.core.primitive import REGISTRY, Primitive
from ember.core.staging import trace_to_graph
from ember.ir.interpreter import eval_graph
from ember.test_util import check_grads
from ember.ops import rules
from ember.transforms import custom, remat  # noqa: F401  (register primitives)
from ember.transforms.partial_eval import partial_eval_graph
from ember.ops.rules import UndefinedPrimal, Zero
from ember.transforms.transpose import backward_pass


@pytest.mark.parametrize("rule", ["jvp", "transpose", "batch"])
def test_every_primitive_has_each_rule_or_says_why_not(rule):
    missing = sorted(name for name, prim in REGISTRY.items()
                     if getattr(prim, f"{rule}_rule") is None and rule not in prim.waived)
    assert missing == [], f"primitives without a {rule} rule or waiver: {missing}"


def _private_primitive(name):
    """A primitive for this test only, kept out of the global registry."""
    prim = Primitive(name)
    del REGISTRY[name]
    prim.def_abstract_eval(lambda *avals, **params: avals[0])
    return prim


@pytest.fixture(scope="module")
def scale_p():
    """scale(x, s) = x * s, defined with the rule makers (linear in x only)."""
    prim = _private_primitive("test_scale")
    prim.def_impl(lambda x, s: np.asarray(x) * s)
    rules.defjvp(prim, lambda t, x, s: lax.mul(t, s), lambda t, x, s: lax.mul(x, t))
    prim.def_transpose(lambda ct, x, s: [lax.mul(ct, s), None])
    rules.def_elementwise_batch(prim)
    return prim


def test_defjvp_rule_gives_correct_derivatives(x64, scale_p):
    x, s = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    check_grads(lambda x, s: scale_p.bind(x, s), (x, s), order=2)
    np.testing.assert_allclose(ember.vmap(lambda x, s: scale_p.bind(x, s))(x, s), x * s)


def test_deflinear_and_linear_jvp(x64):
    prim = _private_primitive("test_double")
    prim.def_impl(lambda x: np.asarray(x) * 2)
    rules.deflinear(prim, lambda ct, x: [lax.mul(ct, 2.0)])
    x = np.array([1.0, -1.0])
    _, tangent = ember.jvp(lambda x: prim.bind(x), (x,), (np.array([1.0, 0.5]),))
    np.testing.assert_allclose(tangent, [2.0, 1.0])
    check_grads(lambda x: prim.bind(x), (x,), modes=("rev",))


def test_symbolic_zero_tangents_skip_rules(x64):
    calls = []
    prim = _private_primitive("test_counted")
    prim.def_impl(lambda x: np.asarray(x) + 1)

    def jvp(primals, tangents):
        calls.append(1)
        return prim.bind(*primals), tangents[0]

    prim.def_jvp(jvp)
    y = np.array(1.0)
    ember.jvp(lambda x: x * prim.bind(y), (np.array(2.0),), (np.array(1.0),))
    assert calls == []  # y does not depend on x: its tangent is a symbolic zero


def test_partial_eval_graph_splits_known_and_unknown(x64):
    f32 = ShapedArray((3,), np.dtype(np.float64))
    graph = trace_to_graph(lambda a, b: [jnp.sin(a) * b, jnp.cos(a)], [f32, f32])
    known, unknown, out_unknowns, num_res = partial_eval_graph(graph, [False, True])
    assert out_unknowns == [True, False]
    a, b = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])
    known_outs = eval_graph(known, [a])
    np.testing.assert_allclose(known_outs[0], np.cos(a))
    residuals = known_outs[1:]
    assert len(residuals) == num_res == 1
    np.testing.assert_allclose(eval_graph(unknown, [*residuals, b])[0], np.sin(a) * b)
    assert {e.prim.name for e in unknown.eqns} == {"mul"}  # sin(a) was computed as known


def test_backward_pass_evaluates_the_nonlinear_part_first(x64):
    f64 = ShapedArray((2,), np.dtype(np.float64))
    graph = trace_to_graph(lambda r, t: [jnp.sin(r) * t], [f64, f64])
    r = np.array([0.5, 1.0])
    ct_r, ct_t = backward_pass(graph, [], [r, UndefinedPrimal(f64)], [np.array([1.0, 2.0])])
    assert ct_r is None
    np.testing.assert_allclose(ct_t, np.sin(r) * [1.0, 2.0])
    (zero,) = backward_pass(trace_to_graph(lambda t: [t * 0.0 + 1.0], [f64]), [],
                            [UndefinedPrimal(f64)], [Zero(f64)])
    assert isinstance(zero, Zero)


def test_missing_transpose_rule_is_reported(x64):
    prim = _private_primitive("test_not_transposable")
    prim.def_impl(lambda x: np.asarray(x))
    prim.def_jvp(lambda primals, tangents: (prim.bind(*primals), prim.bind(*tangents)))
    with pytest.raises(TypeError, match="cannot transpose primitive 'test_not_transposable'"):
        ember.grad(lambda x: prim.bind(x))(np.array(1.0))


def test_check_grads_catches_a_wrong_rule(x64):
    prim = _private_primitive("test_wrong_sin")
    prim.def_impl(np.sin)
    rules.defjvp(prim, lambda t, x: lax.mul(t, lax.sin(x)))  # should be cos
    x = np.array([0.3, 0.9])
    with pytest.raises(AssertionError, match="finite differences"):
        check_grads(lambda x: prim.bind(x), (x,), modes=("fwd",))
    with pytest.raises(AssertionError, match="vjp"):
        check_grads(lambda x: prim.bind(x), (x,), modes=("rev",))


def test_check_grads_passes_second_order_and_rejects_bad_modes(x64):
    check_grads(lambda x, y: jnp.sum(jnp.exp(x) * y ** 2), (np.ones(2), np.ones(2)), order=2)
    with pytest.raises(ValueError, match="modes"):
        check_grads(jnp.sin, (np.ones(2),), modes=("sideways",))
