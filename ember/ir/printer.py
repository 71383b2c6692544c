"""Graph → text. The format reads like JAX's jaxprs and parses back (ir/parser.py).

    graph(a:f32[3,4], b:f32[4]) consts(w:f32[2]=[0.5, 1.5]) {
      c:f32[3,4] = broadcast_in_dim[broadcast_dimensions=(1,), shape=(3, 4)] b   # model.py:12
      d:f32[3,4] = add a c                                                    # model.py:12
      return (d)
    }

Grammar, in words:

- A value's type is ``dtype[dims]`` with short dtype names (``f32``, ``bf16``, ``i8``,
  ``u32``, ``bool``, ``c64``). Literals are ``value:dtype`` (``1.0:f32``, ``-inf:f16``,
  ``nan:f32``, ``-0.0:f32``, ``True:bool``, ``(1.0-2.0j):c64``); floats print with
  ``repr`` so they round-trip exactly (a NaN's sign and payload are not kept).
- Constants follow the inputs in ``consts(...)``; a constant's values are written as a
  flat list when it has at most ``CONST_TEXT_LIMIT`` elements and is on the host.
- Params, sorted by name: ints, floats, bools, ``None``, strings (Python quoting), tuples,
  lists, dtypes (``f32``), types (``f32[3]``), arrays (``array(f32[2], [1.0, 2.0])``),
  nested graphs (printed inline, indented), NamedTuples and dataclasses defined in
  ``ember.ops`` modules (``GatherDimensionNumbers(offset_dims=(1,), ...)``) and enum
  members (``Precision.HIGHEST``). Anything else prints as ``<...>`` and cannot be parsed.
- A variable prints as its ``hint`` (the name the parser read) where that is a free
  identifier; other variables get fresh names ``a``, ``b``, ... ``aa``, ... Every nested
  graph has its own names. Source locations end a line: ``# file:line``.
"""
from __future__ import annotations

import dataclasses
import enum
import itertools
import math
import re
from typing import Any, Iterator

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.trace import Tracer
from ember.ir.graph import Eqn, Graph, Literal, Var

CONST_TEXT_LIMIT = 64  # constants with more elements print without their values
RESERVED_NAMES = frozenset({"inf", "nan", "return", "True", "False", "None"})  # parser words
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _fresh_names() -> Iterator[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    for length in itertools.count(1):
        for combo in itertools.product(letters, repeat=length):
            yield "".join(combo)


def _usable_hint(hint: str) -> bool:
    return bool(_IDENTIFIER.match(hint)) and hint not in RESERVED_NAMES


class _Namer:
    """Names of one graph's variables: hints where free, else fresh letters."""

    def __init__(self, graph: Graph) -> None:
        self._names: dict[Var, str] = {}
        self._fresh = _fresh_names()
        defined = [*graph.inputs, *graph.constvars, *(v for e in graph.eqns for v in e.outputs)]
        self._hinted: dict[str, Var] = {}
        for var in defined:
            if _usable_hint(var.hint):
                self._hinted.setdefault(var.hint, var)
        for var in defined:  # name in print order, so any one line names vars as the whole
            self(var)

    def __call__(self, var: Var) -> str:
        name = self._names.get(var)
        if name is None:
            name = var.hint if self._hinted.get(var.hint) is var else self._next_free()
            self._names[var] = name
        return name

    def _next_free(self) -> str:
        name = next(self._fresh)
        while name in self._hinted or name in RESERVED_NAMES:
            name = next(self._fresh)
        return name


# --- scalars and arrays ----------------------------------------------------------------

def format_scalar(value: Any) -> str:
    """A Python scalar (a param) as the parser reads it back exactly."""
    if isinstance(value, complex):
        return _format_complex(value.real, value.imag, repr)
    if isinstance(value, float):
        return repr(value)  # 'inf', 'nan', '-0.0' and exact round trip of floats
    return str(value)


def format_element(value: np.generic) -> str:
    """An array element: the shortest text that gives back the same value in its dtype."""
    if isinstance(value, np.complexfloating):
        return _format_complex(value.real, value.imag, str)
    if isinstance(value, np.bool_):
        return str(bool(value))
    return str(value)  # NumPy prints floats shortest-round-trip: 0.1 stays 0.1 in f32


def _format_complex(real: Any, imag: Any, text) -> str:
    sign = "-" if math.copysign(1.0, imag) < 0 and not math.isnan(imag) else "+"
    return f"({text(real)}{sign}{text(abs(imag))}j)"


def format_literal(lit: Literal) -> str:
    return f"{format_element(lit.value[()])}:{dtypes.short_name(lit.aval.dtype)}"


def format_values(array: np.ndarray) -> str:
    """The elements of ``array`` in row-major order, as a flat list."""
    return "[" + ", ".join(format_element(v) for v in np.ravel(array)) + "]"


def host_value(value: Any) -> np.ndarray | None:
    """A constant's value as a NumPy array, or None if it is not on the host."""
    if isinstance(value, Tracer) or not hasattr(value, "__array__"):
        return None
    return np.asarray(value)


# --- params ----------------------------------------------------------------------------

def format_param(value: Any, indent: int, source: bool = True) -> str:
    if isinstance(value, Graph):
        return _print_graph(value, indent, source)
    if isinstance(value, ShapedArray):
        return value.str_short()
    if isinstance(value, np.dtype):
        return dtypes.short_name(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return _format_record(value, value._asdict().items(), indent, source)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value) if f.init)
        return _format_record(value, items, indent, source)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(format_param(v, indent, source) for v in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, np.ndarray):
        aval = ShapedArray(value.shape, value.dtype)
        return f"array({aval.str_short()}, {format_values(value)})"
    if isinstance(value, (bool, int, float, complex, np.generic)) or value is None:
        return format_element(value) if isinstance(value, np.generic) else format_scalar(value)
    name = getattr(value, "__name__", None)  # functions: no text form
    return f"<{type(value).__name__} {name}>" if name else f"<{type(value).__name__}>"


def _format_record(value: Any, items, indent: int, source: bool) -> str:
    inner = ", ".join(f"{k}={format_param(v, indent, source)}" for k, v in items)
    return f"{type(value).__name__}({inner})"


# --- graphs ----------------------------------------------------------------------------

def _atom(atom: Var | Literal, namer: _Namer) -> str:
    return format_literal(atom) if isinstance(atom, Literal) else namer(atom)


def _typed(var: Var, namer: _Namer) -> str:
    return f"{namer(var)}:{var.aval.str_short()}"


def _const_decl(var: Var, value: Any, namer: _Namer) -> str:
    text = _typed(var, namer)
    host = host_value(value) if var.aval.size <= CONST_TEXT_LIMIT else None
    return text if host is None else f"{text}={format_values(host)}"


def _eqn_text(eqn: Eqn, namer: _Namer, indent: int, source: bool) -> str:
    params = ""
    if eqn.params:
        items = ", ".join(f"{k}={format_param(v, indent, source)}"
                          for k, v in sorted(eqn.params.items()))
        params = f"[{items}]"
    outs = " ".join(_typed(v, namer) for v in eqn.outputs)
    ins = " ".join(_atom(a, namer) for a in eqn.inputs)
    text = f"{outs} = {eqn.prim.name}{params} {ins}".rstrip()
    if source and eqn.source is not None:
        text += f"   # {eqn.source.short()}"
    return " " * indent + text


def eqn_text(eqn: Eqn, graph: Graph) -> str:
    """One equation of ``graph`` as ``print_graph`` writes it (for error messages)."""
    return _eqn_text(eqn, _Namer(graph), 0, source=False)


def _print_graph(graph: Graph, indent: int, source: bool) -> str:
    namer = _Namer(graph)
    pad = " " * indent
    header = "graph(" + ", ".join(_typed(v, namer) for v in graph.inputs) + ")"
    if graph.constvars:
        values = graph.constvals or [None] * len(graph.constvars)
        header += " consts(" + ", ".join(
            _const_decl(v, c, namer) for v, c in zip(graph.constvars, values)) + ")"
    lines = [header + " {", *(_eqn_text(eqn, namer, indent + 2, source) for eqn in graph.eqns)]
    outs = ", ".join(_atom(a, namer) for a in graph.outputs)
    lines += [f"{pad}  return ({outs})", pad + "}"]
    return "\n".join(lines)


def print_graph(graph: Graph, source: bool = True) -> str:
    """The text of ``graph``; ``source=False`` leaves out the source-location comments."""
    return _print_graph(graph, 0, source)


def var_names(graph: Graph) -> dict[Var, str]:
    """The names ``print_graph`` gives ``graph``'s variables, for listings that refer to
    the printed graph (the CPU backend's schedule in ``compiled.as_text()``)."""
    return dict(_Namer(graph)._names)
