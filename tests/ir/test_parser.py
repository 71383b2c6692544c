"""Print → parse → print is the identity, and parsed graphs evaluate like the original."""
import dataclasses
import enum
import math
from typing import NamedTuple

import hypothesis.strategies as st
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given

import ember
import ember.lax as lax
from ember.core.abstract import ShapedArray
from ember.core.primitive import REGISTRY
from ember.core.source_info import SourceInfo
from ember.ir.graph import Eqn, Graph, Literal, Var
from ember.ir.interpreter import eval_graph
from ember.ir.parser import IRParseError, parse_graph
from ember.ir.printer import print_graph

BIG = np.ones((100, 100), np.float32)


def elementwise(x):
    y = lax.add(lax.mul(lax.sin(x), 2.0), lax.cos(x))
    z = lax.div(lax.max(y, lax.exp(lax.neg(y))), 3.0)
    flag = lax.convert_element_type(lax.gt(z, 0.5), np.int32)
    return z, flag, lax.add(lax.mul(y, -0.0), float("inf"))


def shapes(x):
    y = lax.transpose(lax.reshape(x, (4, 3)), (1, 0))
    return lax.add(lax.broadcast_in_dim(y, (2, 3, 4), (1, 2)), BIG[:2, :3, None] * np.ones(4, np.float32))


FUNCTIONS = [(elementwise, np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)),
             (shapes, np.arange(12, dtype=np.float32).reshape(3, 4))]


def _round_trip(graph: Graph, consts=None) -> Graph:
    text = print_graph(graph)
    parsed = parse_graph(text, consts)
    assert print_graph(parsed) == text
    return parsed


@pytest.mark.parametrize("fun,arg", FUNCTIONS, ids=lambda f: getattr(f, "__name__", ""))
def test_round_trip_of_traced_functions(fun, arg):
    graph = ember.make_graph(fun)(arg)
    names = {"b": graph.constvals[0]} if graph.constvars else None
    parsed = _round_trip(graph, names)
    expected = eval_graph(graph, [arg])
    for want, got in zip(expected, eval_graph(parsed, [arg])):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def many_primitives(x, idx, image, kernel):
    import ember.numpy as jnp

    u32 = lax.iota(np.uint32, 4)
    return (x[idx], x.at[idx].add(1.0),
            lax.conv_general_dilated(image, kernel, (1, 1), "SAME"),
            jnp.fft.rfft(x, axis=-1), lax.sort(x, dimension=0), lax.top_k(x, 2),
            lax.dot_general(x, x, (((1,), (1,)), ((), ())), preferred_element_type=np.float32),
            lax.cumsum(x, axis=1), lax.argmax(x, 1, np.int32),
            lax.pad(x, np.float32(0), [(1, 0, 1), (0, 2, 0)]),
            lax.dynamic_slice(x, (idx[0], 0), (2, 2)), lax.concatenate([x, x], 0),
            lax.rev(x, (0,)), lax.threefry2x32(u32, u32, u32, u32),
            lax.cond(lax.gt(lax.reduce_sum(x, (0, 1)), 0.0), lax.neg, lax.exp, x),
            lax.scan(lambda c, row: (lax.add(c, row), lax.sin(c)), x[0], x),
            lax.while_loop(lambda c: lax.lt(c, 10), lambda c: lax.add(c, 3), np.int32(0)))


def test_round_trip_of_every_primitive_family():
    rng = np.random.default_rng(0)
    args = [rng.normal(size=(4, 5)).astype(np.float32), np.array([1, -2], np.int32),
            rng.normal(size=(1, 2, 5, 5)).astype(np.float32),
            rng.normal(size=(3, 2, 3, 3)).astype(np.float32)]
    graph = ember.make_graph(many_primitives)(*args)
    text = print_graph(graph)
    for name in ("GatherDimensionNumbers(", "ScatterDimensionNumbers(", "ConvDimensionNumbers(",
                 "preferred_element_type=f32", "body=graph(", "branches=(graph("):
        assert name in text
    parsed = parse_graph(text)
    assert print_graph(parsed) == text
    for want, got in zip(eval_graph(graph, args), eval_graph(parsed, args)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_source_locations_round_trip():
    graph = ember.make_graph(lambda x: lax.sin(x))(np.ones(3, np.float32))
    text = print_graph(graph)
    assert "# test_parser.py:" in text
    parsed = parse_graph(text)
    assert parsed.eqns[0].source.line == graph.eqns[0].source.line
    assert parsed.eqns[0].source.file == "test_parser.py"


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64", "i8", "i32", "u8", "u64",
                                   "bool", "c64"])
def test_literals_of_every_dtype_round_trip(dtype):
    values = {"bool": ["True", "False"], "c64": ["(1.5-2.0j)", "(nan+infj)", "(-0.0+0.0j)"],
              "u64": ["18446744073709551615", "0"], "i8": ["-128", "127"],
              "i32": ["-7", "0"], "u8": ["255", "0"]}
    floats = ["inf", "-inf", "nan", "-0.0", "0.1", "1e-05", "65504.0"]
    for value in values.get(dtype, floats):
        graph = parse_graph(f"graph() {{\n  return ({value}:{dtype})\n}}")
        literal = graph.outputs[0].value
        reparsed = _round_trip(graph).outputs[0].value
        assert reparsed.dtype == literal.dtype and reparsed.tobytes() == literal.tobytes() \
            or (np.isnan(literal) and np.isnan(reparsed))


def test_negative_zero_and_nan_literals_keep_their_value():
    graph = parse_graph("graph() {\n  return (-0.0:f32, nan:f16, 0.1:bf16)\n}")
    zero, nan, tenth = (lit.value for lit in graph.outputs)
    assert math.copysign(1.0, float(zero)) == -1.0
    assert np.isnan(nan) and nan.dtype == np.float16
    assert tenth.dtype == ml_dtypes.bfloat16 and tenth == np.asarray(0.1, ml_dtypes.bfloat16)


def _eqn_with_params(params):
    """An identity-like equation whose params exercise the printer and parser."""
    a = Var(ShapedArray((2,), np.float32))
    b = Var(ShapedArray((2,), np.float32))
    eqn = Eqn(REGISTRY["neg"], [a], [b], params, SourceInfo("m.py", 3, "f"))
    return Graph([a], [b], [eqn])


def test_params_of_every_kind_round_trip():
    inner = parse_graph("graph(x:f32[]) {\n  y:f32[] = sin x\n  return (y)\n}")
    params = {"i": -3, "f": 0.1, "g": float("-inf"), "n": None, "t": True, "s": "it's \"q\"",
              "tup": (1, (2,), ()), "lst": [1.5, "a"], "dt": np.dtype(np.int8),
              "ty": ShapedArray((2, 3), np.float16), "body": inner, "bodies": (inner, inner),
              "arr": np.array([[1, 2], [3, 4]], np.int32), "c": 1 + 2j}
    graph = _round_trip(_eqn_with_params(params))
    got = graph.eqns[0].params
    assert got["i"] == -3 and got["f"] == 0.1 and got["g"] == -math.inf and got["n"] is None
    assert got["t"] is True and got["s"] == params["s"] and got["tup"] == (1, (2,), ())
    assert got["lst"] == [1.5, "a"] and got["dt"] == np.int8 and got["c"] == 1 + 2j
    assert got["ty"] == params["ty"] and isinstance(got["body"], Graph)
    np.testing.assert_array_equal(got["arr"], params["arr"])
    assert got["arr"].dtype == np.int32


class DimensionNumbers(NamedTuple):
    lhs: tuple
    rhs: tuple


@dataclasses.dataclass(frozen=True)
class Window:
    strides: tuple
    padding: str = "SAME"


class Mode(enum.Enum):
    CLIP = 1
    FILL = 2


def test_record_and_enum_params_round_trip(monkeypatch):
    from ember.ir import parser

    known = {c.__name__: c for c in (DimensionNumbers, Window, Mode)}
    monkeypatch.setattr(parser, "param_types", lambda: known)
    params = {"dimension_numbers": DimensionNumbers((1,), ((0, 2), ())),
              "window": Window((2, 2), "VALID"), "mode": Mode.FILL}
    graph = _round_trip(_eqn_with_params(params))
    assert graph.eqns[0].params == params
    assert "dimension_numbers=DimensionNumbers(lhs=(1,), rhs=((0, 2), ()))" in print_graph(graph)
    assert "mode=Mode.FILL" in print_graph(graph)


def test_param_types_come_from_ops_modules():
    from ember.ir.parser import param_types

    for name, cls in param_types().items():
        assert cls.__module__.startswith("ember.ops.") and cls.__name__ == name


def test_nested_graph_names_are_their_own():
    text = ("graph(a:f32[]) {\n  b:f32[] = neg[body=graph(a:f32[]) {\n"
            "    b:f32[] = sin a\n    return (b)\n  }] a   # m.py:1\n  return (b)\n}")
    graph = parse_graph(text)
    assert print_graph(graph) == text
    assert graph.eqns[0].params["body"].inputs[0] is not graph.inputs[0]


def test_constants_print_small_values_and_take_large_ones_by_name():
    w = np.arange(3, dtype=np.float32)
    graph = ember.make_graph(lambda x: lax.add(lax.mul(x, w), BIG[0, :3]))(np.ones(3, np.float32))
    text = print_graph(graph)
    assert "=[0.0, 1.0, 2.0]" in text
    parsed = parse_graph(text)
    np.testing.assert_array_equal(parsed.constvals[0], w)
    big = parse_graph("graph() consts(w:f32[100,100]) {\n  return (w)\n}", {"w": BIG})
    assert big.constvals[0] is BIG
    with pytest.raises(IRParseError, match=r"w:f32\[100,100\] has no value.*consts="):
        parse_graph("graph() consts(w:f32[100,100]) {\n  return (w)\n}")


def test_printer_prefers_parsed_names_and_stays_unique():
    graph = parse_graph("graph(b:f32[]) {\n  a:f32[] = sin b\n  return (a)\n}")
    fresh = Var(ShapedArray((), np.float32))
    extra = Eqn(REGISTRY["cos"], [graph.outputs[0]], [fresh], {})
    graph = graph.replace(eqns=[*graph.eqns, extra], outputs=[fresh])
    assert print_graph(graph) == ("graph(b:f32[]) {\n  a:f32[] = sin b\n  c:f32[] = cos a\n"
                                  "  return (c)\n}")


def test_fresh_names_skip_words_the_parser_reserves():
    inputs = [Var(ShapedArray((), np.float32), hint=h) for h in ("inf", "nan", "return")]
    text = print_graph(Graph(inputs, inputs, []))
    assert print_graph(parse_graph(text)) == text


@pytest.mark.parametrize("text,message", [
    ("graph(a:f32[]) {\n  b:f32[] = nosuchprim a\n  return (b)\n}", "unknown primitive"),
    ("graph(a:f32[]) {\n  b:f32[] = sin c\n  return (b)\n}", "'c' is used before"),
    ("graph(a:f32[]) {\n  a:f32[] = sin a\n  return (a)\n}", "'a' is defined twice"),
    ("graph(a:q32[]) {\n  return (a)\n}", "unknown dtype 'q32'"),
    ("graph(a:f32[]) {\n  b:f32[] = sin[k=<function f>] a\n  return (b)\n}", "no text form"),
    ("graph(a:f32[]) {\n  b:f32[] = sin[k=Nope(x=1)] a\n  return (b)\n}", "unknown param type"),
    ("graph(a:f32[]) {\n  return (a)\n} extra", "unexpected text after the graph"),
    ("graph() consts(w:f32[2]=[1.0]) {\n  return (w)\n}", "needs 2 values"),
    ("graph() {\n  return (300:i8)\n}", "300 is not a value of dtype i8"),
    ("graph() {\n  return (1.5:i32)\n}", "1.5 is not a value of dtype i32"),
    ("graph(a:f32[]) {\n  b:f32[] = sin a $\n}", "line 2, column 19: unexpected character"),
])
def test_parse_errors_say_where_and_what(text, message):
    with pytest.raises(IRParseError, match=message):
        parse_graph(text)


def test_parse_errors_are_value_errors():
    assert issubclass(IRParseError, ValueError) and issubclass(IRParseError, ember.errors.EmberError)


def test_unprintable_params_show_their_kind():
    graph = _eqn_with_params({"fn": print})
    assert "[fn=<builtin_function_or_method print>]" in print_graph(graph)


def test_literal_values_are_scalars_of_their_dtype():
    graph = parse_graph("graph() {\n  return (3:u8, True:bool)\n}")
    assert all(isinstance(lit, Literal) for lit in graph.outputs)
    assert graph.outputs[0].value.dtype == np.uint8 and graph.outputs[1].value.dtype == bool


@given(st.floats(width=32, allow_nan=False) | st.floats(width=64, allow_nan=False),
       st.sampled_from(["f16", "bf16", "f32", "f64"]))
def test_every_float_literal_round_trips_bit_for_bit(value, dtype):
    literal = parse_graph(f"graph() {{\n  return ({value!r}:{dtype})\n}}").outputs[0].value
    again = _round_trip(Graph([], [Literal(literal, ShapedArray((), literal.dtype))], []))
    assert again.outputs[0].value.tobytes() == literal.tobytes()
