"""Graph → text. The format reads like JAX's jaxprs and parses back (ir/parser.py).

    graph(a:f32[3,4], b:f32[4]) {
      c:f32[3,4] = broadcast_in_dim[shape=(3, 4), broadcast_dimensions=(1,)] b   # model.py:12
      d:f32[3,4] = add a c                                                     # model.py:12
      return (d)
    }

Constants print as a ``consts(...)`` list after the inputs; nested graphs (control-flow
bodies) print inline as params, indented.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.primitive import Primitive
from ember.ir.graph import Eqn, Graph, Literal, Var


def _names() -> "itertools.Iterator[str]":
    letters = "abcdefghijklmnopqrstuvwxyz"
    for length in itertools.count(1):
        for combo in itertools.product(letters, repeat=length):
            yield "".join(combo)


class _Namer:
    def __init__(self) -> None:
        self._names: dict[Var, str] = {}
        self._fresh = _names()
        self._taken: set[str] = set()

    def __call__(self, var: Var) -> str:
        name = self._names.get(var)
        if name is None:
            name = next(self._fresh)
            while name in self._taken:
                name = next(self._fresh)
            self._names[var] = name
            self._taken.add(name)
        return name


def format_literal(lit: Literal) -> str:
    value = lit.value.item()
    if isinstance(value, float):
        text = repr(value)  # 'inf', 'nan' and exact round trip of floats
    else:
        text = str(value)
    return f"{text}:{dtypes.short_name(lit.aval.dtype)}"


def format_param(value: Any, indent: int, namer_factory) -> str:
    if isinstance(value, Graph):
        return _print_graph(value, indent + 2, namer_factory())
    if isinstance(value, np.dtype):
        return dtypes.short_name(value)
    if isinstance(value, Primitive):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(format_param(v, indent, namer_factory) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_param(v, indent, namer_factory) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, np.ndarray):
        return f"array({value.tolist()!r}, {dtypes.short_name(value.dtype)})"
    if callable(value):
        return f"<fn {getattr(value, '__name__', type(value).__name__)}>"
    return str(value)


def _atom(atom, namer: _Namer) -> str:
    return format_literal(atom) if isinstance(atom, Literal) else namer(atom)


def _typed(var: Var, namer: _Namer) -> str:
    return f"{namer(var)}:{var.aval.str_short()}"


def _eqn_text(eqn: Eqn, namer: _Namer, indent: int, source: bool) -> str:
    params = ""
    if eqn.params:
        items = ", ".join(f"{k}={format_param(v, indent, _Namer)}"
                          for k, v in sorted(eqn.params.items()))
        params = f"[{items}]"
    outs = " ".join(_typed(v, namer) for v in eqn.outputs)
    ins = " ".join(_atom(a, namer) for a in eqn.inputs)
    text = f"{outs} = {eqn.prim.name}{params} {ins}".rstrip()
    if source and eqn.source is not None:
        text += f"   # {eqn.source.short()}"
    return " " * indent + text


def _print_graph(graph: Graph, indent: int, namer: _Namer, source: bool = True) -> str:
    pad = " " * indent
    header = "graph(" + ", ".join(_typed(v, namer) for v in graph.inputs) + ")"
    if graph.constvars:
        header += " consts(" + ", ".join(_typed(v, namer) for v in graph.constvars) + ")"
    lines = [header + " {"]
    for eqn in graph.eqns:
        lines.append(_eqn_text(eqn, namer, indent + 2, source))
    outs = ", ".join(_atom(a, namer) for a in graph.outputs)
    lines.append(f"{pad}  return ({outs})")
    lines.append(pad + "}")
    return "\n".join(lines)


def print_graph(graph: Graph, source: bool = True) -> str:
    return _print_graph(graph, 0, _Namer(), source)
