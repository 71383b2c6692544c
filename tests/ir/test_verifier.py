import numpy as np
import pytest

import ember
import ember.lax as lax
from ember.core.abstract import ShapedArray
from ember.core.primitive import REGISTRY
from ember.core.source_info import SourceInfo
from ember.ir.graph import Eqn, Graph, Literal, Var
from ember.ir.parser import parse_graph
from ember.ir.verifier import VerificationError, verify


def _f32(*shape):
    return ShapedArray(shape, np.float32)


def test_traced_graphs_verify():
    def f(x):
        y = lax.broadcast_in_dim(lax.reduce_sum(lax.exp(x), (1,)), (3, 4), (0,))
        return lax.div(x, y), lax.transpose(x, (1, 0))

    verify(ember.make_graph(f)(np.ones((3, 4), np.float32)))


def test_wrong_output_type_names_the_equation_and_line():
    graph = parse_graph("graph(a:f32[3]) {\n  b:f32[4] = sin a   # model.py:12\n  return (b)\n}")
    with pytest.raises(VerificationError) as info:
        verify(graph)
    message = str(info.value)
    assert "output 0 is typed f32[4] but sin gives f32[3]" in message
    assert "b:f32[4] = sin a" in message and "model.py:12" in message


def test_abstract_eval_errors_are_reported():
    graph = parse_graph("graph(a:f32[3], b:f32[4]) {\n  c:f32[3] = add a b\n  return (c)\n}")
    with pytest.raises(VerificationError, match=r"add rejects its input types: .*\(3,\).*\(4,\)"):
        verify(graph)


def test_use_before_definition():
    a, b, c = Var(_f32(2)), Var(_f32(2)), Var(_f32(2))
    eqns = [Eqn(REGISTRY["sin"], [b], [c], {}), Eqn(REGISTRY["cos"], [a], [b], {})]
    with pytest.raises(VerificationError, match="input 0 .* is used before it is defined"):
        verify(Graph([a], [c], eqns))


def test_double_definition():
    a, b = Var(_f32(2)), Var(_f32(2))
    eqns = [Eqn(REGISTRY["sin"], [a], [b], {}), Eqn(REGISTRY["cos"], [a], [b], {})]
    with pytest.raises(VerificationError, match="defined a second time"):
        verify(Graph([a], [b], eqns))
    with pytest.raises(VerificationError, match="appears twice among the inputs"):
        verify(Graph([a, a], [a], []))


def test_undefined_output():
    a, b = Var(_f32(2)), Var(_f32(2))
    with pytest.raises(VerificationError, match="graph output 0 .* is never defined"):
        verify(Graph([a], [b], []))


def test_literal_must_be_a_scalar_of_its_type():
    a, b = Var(_f32()), Var(_f32())
    bad = Literal(np.float32(1), _f32())
    bad.value = np.zeros(2, np.float32)
    eqn = Eqn(REGISTRY["add"], [a, bad], [b], {}, SourceInfo("m.py", 4, "f"))
    with pytest.raises(VerificationError, match=r"(?s)literal input 1 must be a scalar.*m.py:4"):
        verify(Graph([a], [b], [eqn]))


def test_constant_count_must_match():
    a = Var(_f32(2))
    with pytest.raises(VerificationError, match="1 constants but 2 constant values"):
        verify(Graph([], [a], [], [a], [np.zeros(2), np.zeros(2)]))


def test_nested_graphs_are_verified_and_closed():
    body = parse_graph("graph(x:f32[]) {\n  y:f32[2] = sin x\n  return (y)\n}")
    a, b = Var(_f32()), Var(_f32())
    eqn = Eqn(REGISTRY["neg"], [a], [b], {"body": body})
    with pytest.raises(VerificationError, match=r"nested graph: .*typed f32\[2\]"):
        verify(Graph([a], [b], [eqn]))
    outer = Var(_f32())
    leaky = Graph([], [outer], [])
    eqn = Eqn(REGISTRY["neg"], [a], [b], {"branches": (leaky,)})
    with pytest.raises(VerificationError, match="nested graph: graph output 0"):
        verify(Graph([a], [b], [eqn]))
    with_consts = Graph([], [outer], [], [outer], [np.float32(1)])
    eqn = Eqn(REGISTRY["neg"], [a], [b], {"body": with_consts})
    with pytest.raises(VerificationError, match="nested graph has constants"):
        verify(Graph([a], [b], [eqn]))


def test_multiple_results_count():
    graph = parse_graph("graph(k:u32[2], c:u32[2]) {\n"
                        "  x:u32[2] = threefry2x32 k k c c\n  return (x)\n}")
    with pytest.raises(VerificationError, match="produces 2 outputs, the equation binds 1"):
        verify(graph)
