"""Text → Graph: reads exactly what ``ir/printer.py`` writes (the grammar is described
there). Nothing is evaluated: primitives come from ``REGISTRY``, structured params from
the NamedTuples, dataclasses and enums that ``ember.ops`` modules define."""
from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import importlib
import pkgutil
import re
from typing import Any, Iterator, Mapping, NamedTuple

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import REGISTRY
from ember.core.source_info import SourceInfo
from ember.errors import EmberValueError
from ember.ir.graph import Atom, Eqn, Graph, Literal, Var

PARSED_FUNCTION = "<ir>"  # SourceInfo.function of locations read from text


class IRParseError(EmberValueError):
    """The text is not a graph as the printer writes it."""


class _Token(NamedTuple):
    kind: str
    text: str
    line: int
    column: int


_TOKEN_SPEC = [
    ("COMMENT", r"#[^\n]*"),
    ("NEWLINE", r"\n"),
    ("SPACE", r"[ \t\r]+"),
    ("STRING", r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\""),
    ("COMPLEX", r"\([-+]?(?:\d|\.|inf|nan)[^()\s,'\"]*j\)"),
    ("NUMBER", r"-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)(?![A-Za-z0-9_])"),
    ("NAME", r"[A-Za-z_][A-Za-z0-9_]*"),
    ("PUNCT", r"[()\[\]{},=:.<>]"),
]
_TOKEN_RE = re.compile("|".join(f"(?P<{kind}>{rx})" for kind, rx in _TOKEN_SPEC))
_SOURCE_RE = re.compile(r"#\s*(.+):(\d+)\s*$")


def _tokenize(text: str) -> Iterator[_Token]:
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise IRParseError(f"line {line}, column {pos - line_start + 1}: unexpected "
                               f"character {text[pos]!r}")
        kind = match.lastgroup
        if kind != "SPACE":
            yield _Token(kind, match.group(), line, pos - line_start + 1)
        if kind == "NEWLINE":
            line, line_start = line + 1, match.end()
        pos = match.end()
    yield _Token("END", "", line, pos - line_start + 1)


@functools.cache
def param_types() -> dict[str, type]:
    """NamedTuples, dataclasses and enums defined in ``ember.ops`` modules, by name."""
    import ember.ops

    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(ember.ops.__path__):
        module = importlib.import_module(f"ember.ops.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and value.__module__ == module.__name__
                    and _is_param_type(value)):
                found[value.__name__] = value
    return found


def _is_param_type(cls: type) -> bool:
    return (issubclass(cls, enum.Enum) or dataclasses.is_dataclass(cls)
            or (issubclass(cls, tuple) and hasattr(cls, "_fields")))


def _scalar_value(text: str, dtype: np.dtype) -> np.ndarray:
    """A scalar token's value converted to ``dtype``."""
    if text in ("True", "False"):
        return np.asarray(text == "True", dtype)
    if text.startswith("("):
        return np.asarray(complex(text), dtype)
    if dtypes.is_integer(dtype) or dtypes.is_bool(dtype):
        return np.asarray(int(text), dtype)
    with np.errstate(over="ignore"):  # out of the dtype's range: inf, as a cast gives
        return np.asarray(float(text), dtype)


class _Parser:
    def __init__(self, text: str, consts: Mapping[str, Any]) -> None:
        self._tokens = list(_tokenize(text))
        self._pos = 0
        self._consts = consts

    # --- token helpers --------------------------------------------------------------
    def _peek(self, offset: int = 0) -> _Token:
        return self._tokens[min(self._pos + offset, len(self._tokens) - 1)]

    def _next(self) -> _Token:
        token = self._peek()
        self._pos += 1
        return token

    def _error(self, message: str, token: _Token | None = None) -> IRParseError:
        token = token or self._peek()
        found = repr(token.text) if token.text else "the end of the text"
        return IRParseError(f"line {token.line}, column {token.column}: {message} "
                            f"(found {found})")

    def _at(self, text: str) -> bool:
        token = self._peek()
        return token.text == text and token.kind in ("PUNCT", "NAME")

    def _expect(self, text: str) -> _Token:
        if not self._at(text):
            raise self._error(f"expected {text!r}")
        return self._next()

    def _expect_kind(self, kind: str, what: str) -> _Token:
        if self._peek().kind != kind:
            raise self._error(f"expected {what}")
        return self._next()

    def _skip_newlines(self) -> None:
        while self._peek().kind in ("NEWLINE", "COMMENT"):
            self._next()

    def _comma_list(self, close: str, item) -> list:
        """Items separated by commas (a trailing comma allowed) up to ``close``."""
        items = []
        self._skip_newlines()
        while not self._at(close):
            items.append(item())
            self._skip_newlines()
            if not self._at(close):
                self._expect(",")
                self._skip_newlines()
        self._next()
        return items

    # --- types and atoms ------------------------------------------------------------
    def _dtype(self) -> np.dtype:
        token = self._expect_kind("NAME", "a dtype such as f32")
        try:
            return dtypes.from_short_name(token.text)
        except Exception:
            raise self._error(f"unknown dtype {token.text!r}", token) from None

    def _type(self) -> ShapedArray:
        dtype = self._dtype()
        self._expect("[")
        dims = self._comma_list("]", lambda: int(self._expect_kind("NUMBER", "a dimension").text))
        return ShapedArray(tuple(dims), dtype)

    def _define(self, scope: dict[str, Var]) -> Var:
        token = self._expect_kind("NAME", "a variable name")
        if token.text in scope:
            raise self._error(f"variable {token.text!r} is defined twice", token)
        self._expect(":")
        var = Var(self._type(), hint=token.text)
        scope[token.text] = var
        return var

    def _scalar_token(self) -> _Token:
        token = self._peek()
        if token.kind in ("NUMBER", "COMPLEX") or token.text in ("True", "False"):
            return self._next()
        raise self._error("expected a number, True/False or a complex (re+imj)")

    def _scalar(self, token: _Token, dtype: np.dtype) -> np.ndarray:
        try:
            return _scalar_value(token.text, dtype)
        except (ValueError, OverflowError, TypeError):
            raise self._error(f"{token.text} is not a value of dtype "
                              f"{dtypes.short_name(dtype)}", token) from None

    def _atom(self, scope: dict[str, Var]) -> Atom:
        token = self._peek()
        if self._peek(1).text == ":":
            self._scalar_token()
            self._expect(":")
            dtype = self._dtype()
            return Literal(self._scalar(token, dtype), ShapedArray((), dtype))
        name = self._expect_kind("NAME", "a variable or a literal value:dtype").text
        if name not in scope:
            raise self._error(f"variable {name!r} is used before it is defined", token)
        return scope[name]

    # --- graphs ---------------------------------------------------------------------
    def graph(self) -> Graph:
        self._skip_newlines()
        self._expect("graph")
        self._expect("(")
        scope: dict[str, Var] = {}
        inputs = self._comma_list(")", lambda: self._define(scope))
        constvars, constvals = [], []
        if self._at("consts"):
            self._next()
            self._expect("(")
            for var, value in self._comma_list(")", lambda: self._const(scope)):
                constvars.append(var)
                constvals.append(value)
        self._expect("{")
        self._skip_newlines()
        eqns = []
        while not self._at("return"):
            eqns.append(self._eqn(scope))
            self._skip_newlines()
        self._next()
        self._expect("(")
        outputs = self._comma_list(")", lambda: self._atom(scope))
        self._skip_newlines()
        self._expect("}")
        return Graph(inputs, outputs, eqns, constvars, constvals)

    def _const(self, scope: dict[str, Var]) -> tuple[Var, Any]:
        start = self._peek()
        var = self._define(scope)
        if self._at("="):
            self._next()
            return var, self._values(var.aval)
        if var.hint not in self._consts:
            raise self._error(f"constant {var.hint}:{var.aval.str_short()} has no value in "
                              f"the text; pass it as parse_graph(text, consts={{"
                              f"{var.hint!r}: value}})", start)
        return var, self._consts[var.hint]

    def _values(self, aval: ShapedArray) -> np.ndarray:
        start = self._expect("[")
        tokens = self._comma_list("]", self._scalar_token)
        if len(tokens) != aval.size:
            raise self._error(f"{aval.str_short()} needs {aval.size} values, the text has "
                              f"{len(tokens)}", start)
        flat = [self._scalar(t, aval.dtype) for t in tokens]
        return np.array(flat, dtype=aval.dtype).reshape(aval.shape)

    def _eqn(self, scope: dict[str, Var]) -> Eqn:
        outputs = [self._define(scope)]
        while not self._at("="):
            outputs.append(self._define(scope))
        self._next()
        token = self._expect_kind("NAME", "a primitive name")
        prim = REGISTRY.get(token.text)
        if prim is None:
            raise self._error(f"unknown primitive {token.text!r}", token)
        params = {}
        if self._at("["):
            self._next()
            params = dict(self._comma_list("]", self._param))
        inputs = []
        while self._peek().kind not in ("NEWLINE", "COMMENT", "END") and not self._at("}"):
            inputs.append(self._atom(scope))
        source = None
        if self._peek().kind == "COMMENT":
            source = self._source(self._next())
        return Eqn(prim, inputs, outputs, params, source)

    def _source(self, token: _Token) -> SourceInfo | None:
        match = _SOURCE_RE.match(token.text)
        if match is None:
            return None
        return SourceInfo(match.group(1).strip(), int(match.group(2)), PARSED_FUNCTION)

    # --- params ---------------------------------------------------------------------
    def _param(self) -> tuple[str, Any]:
        name = self._expect_kind("NAME", "a param name").text
        self._expect("=")
        return name, self._value()

    def _value(self) -> Any:
        token = self._peek()
        if token.kind == "NUMBER":
            self._next()
            is_int = re.fullmatch(r"-?\d+", token.text) is not None
            return int(token.text) if is_int else float(token.text)
        if token.kind == "COMPLEX":
            return complex(self._next().text)
        if token.kind == "STRING":
            return ast.literal_eval(self._next().text)
        if self._at("("):
            self._next()
            return tuple(self._comma_list(")", self._value))
        if self._at("["):
            self._next()
            return self._comma_list("]", self._value)
        if token.kind == "NAME":
            return self._named_value()
        if self._at("<"):
            raise self._error("this param has no text form (a Python function or an object "
                              "the printer cannot write) and cannot be parsed")
        raise self._error("expected a param value")

    def _named_value(self) -> Any:
        token = self._peek()
        constants = {"None": None, "True": True, "False": False}
        if token.text in constants:
            self._next()
            return constants[token.text]
        if token.text == "graph":
            return self.graph()
        if token.text == "array":
            return self._array()
        if self._peek(1).text == "(":
            return self._record()
        if self._peek(1).text == ".":
            return self._enum_member()
        if self._peek(1).text == "[":
            return self._type()
        return self._dtype()

    def _array(self) -> np.ndarray:
        self._expect("array")
        self._expect("(")
        aval = self._type()
        self._expect(",")
        values = self._values(aval)
        self._expect(")")
        return values

    def _param_type(self) -> type:
        token = self._expect_kind("NAME", "a param type name")
        cls = param_types().get(token.text)
        if cls is None:
            raise self._error(f"unknown param type {token.text!r}; known: "
                              f"{sorted(param_types())}", token)
        return cls

    def _record(self) -> Any:
        cls = self._param_type()
        self._expect("(")
        fields = dict(self._comma_list(")", self._param))
        try:
            return cls(**fields)
        except TypeError as error:
            raise self._error(f"cannot build {cls.__name__}: {error}") from None

    def _enum_member(self) -> Any:
        cls = self._param_type()
        self._expect(".")
        token = self._expect_kind("NAME", "an enum member")
        try:
            return cls[token.text]
        except KeyError:
            raise self._error(f"{cls.__name__} has no member {token.text!r}", token) from None

    def finish(self) -> None:
        self._skip_newlines()
        if self._peek().kind != "END":
            raise self._error("unexpected text after the graph")


def parse_graph(text: str, consts: Mapping[str, Any] | None = None) -> Graph:
    """The Graph that ``text`` (as written by ``print_graph``) describes.

    Constants printed without values (large, or not on the host) take theirs from
    ``consts``, by printed name. Variables keep their printed names as hints, so
    printing the result reproduces the text.
    """
    parser = _Parser(text, consts or {})
    graph = parser.graph()
    parser.finish()
    return graph
