"""Algebraic simplification: rewrite equations into cheaper equivalent ones.

Every rewrite gives bit-identical results under IEEE arithmetic (NaN payloads aside),
except the two marked *approximate*:

- ``x + (-0.0)``, ``x - 0.0``, ``x * 1``, ``x / 1`` → ``x``; for integers also ``x + 0``
  and ``x * 0`` → ``0`` (for floats ``-0.0 + 0.0`` is ``+0.0`` and ``inf * 0`` is NaN, so
  those stay); ``x * -1`` → ``-x`` (real dtypes);
- ``x / c`` → ``x * (1/c)`` when ``c`` is a float power of two (both round the same
  exact quotient, so this is exact); other divisors are kept, as a reciprocal would
  change results by up to 1 ulp;
- ``-(-x)``, ``max(x, x)``, ``min(x, x)``, ``x & x``, ``x | x`` → ``x``;
- ``integer_pow(x, 2)`` → ``x * x``; ``integer_pow(x, 1)`` → ``x``; ``integer_pow(x, 0)``
  → ``1``;
- transpose of transpose → one transpose (or none); a chain of reshapes (``reshape``,
  ``squeeze``, ``broadcast_in_dim`` that only inserts size-1 axes, ``transpose`` that
  only moves size-1 axes) → one ``reshape`` (or none); broadcast of broadcast → one
  broadcast; identity transposes, reshapes and broadcasts and ``convert_element_type``
  to the same dtype → their operand;
- ``select_n`` with equal cases or a constant predicate → the chosen case;
- ``stop_gradient(x)`` → ``x`` (the compiled graph is final: no transformation follows);
- *approximate*: ``log(exp(x))`` → ``x`` (real floats), and ``exp(log(x))`` → ``x`` where
  ``x`` is known non-negative (made by ``exp``, ``exp2``, ``abs``, ``logistic``,
  ``square`` or an even ``integer_pow``; for negative ``x`` the pair gives NaN, and for
  ``-0.0`` it gives ``+0.0``, so elsewhere it stays). ``x`` is the exact mathematical
  value; the unoptimized program rounds twice (results differ by an ulp or so), and
  ``log(exp(x))`` overflows to ``inf`` (or underflows to ``-inf``) where ``exp`` does.

A constant operand is a literal or a splat (``broadcast_in_dim`` of a literal, the form
constant folding leaves). Rules see their operands' producers already simplified, so
chains collapse in one sweep; the producers left unused are removed by DCE.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import REGISTRY, Primitive
from ember.ir.graph import Atom, Eqn, Graph, Literal, Var
from ember.passes.rewrite import (in_subgraphs, new_eqn, substitute_inputs,
                                  substitute_outputs)

Rule = Callable[[Eqn, "_Context"], Atom | None]
RULES: dict[str, Rule] = {}


def simplify(graph: Graph) -> Graph:
    """``graph`` with the algebraic rewrites of the module docstring applied."""
    context = _Context()
    for eqn in graph.eqns:
        context.visit(in_subgraphs(substitute_inputs(eqn, context.env), simplify))
    return substitute_outputs(graph, context.eqns, context.env)


class _Context:
    """The graph being rebuilt, and what rules may ask of it."""

    def __init__(self) -> None:
        self.env: dict[Var, Atom] = {}
        self.eqns: list[Eqn] = []
        self._producers: dict[Var, Eqn] = {}
        self._source = None

    def visit(self, eqn: Eqn) -> None:
        rule = RULES.get(eqn.prim.name)
        self._source = eqn.source
        replacement = rule(eqn, self) if rule is not None and len(eqn.outputs) == 1 else None
        if replacement is not None and replacement.aval == eqn.outputs[0].aval:
            self.env[eqn.outputs[0]] = replacement
        else:
            self._append(eqn)

    def _append(self, eqn: Eqn) -> None:
        self.eqns.append(eqn)
        for var in eqn.outputs:
            self._producers[var] = eqn

    # --- for rules ------------------------------------------------------------------
    def producer(self, atom: Atom, name: str) -> Eqn | None:
        """The equation of primitive ``name`` that computes ``atom``, if that is one."""
        eqn = self._producers.get(atom) if isinstance(atom, Var) else None
        return eqn if eqn is not None and eqn.prim.name == name else None

    def constant(self, atom: Atom) -> np.ndarray | None:
        """The scalar value of a literal or a splat, else None."""
        if isinstance(atom, Literal):
            return atom.value
        eqn = self.producer(atom, "broadcast_in_dim")
        if eqn is not None and isinstance(eqn.inputs[0], Literal):
            return eqn.inputs[0].value
        return None

    def emit(self, prim: Primitive | str, inputs: list[Atom], **params: Any) -> Var:
        prim = REGISTRY[prim] if isinstance(prim, str) else prim
        eqn = new_eqn(prim, inputs, params, self._source)
        self._append(eqn)
        return eqn.outputs[0]

    def splat(self, value: Any, aval: ShapedArray) -> Atom:
        literal = Literal(np.asarray(value, aval.dtype), ShapedArray((), aval.dtype))
        if aval.shape == ():
            return literal
        return self.emit("broadcast_in_dim", [literal], shape=aval.shape,
                         broadcast_dimensions=())


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn

    return register


# --- predicates on constants -------------------------------------------------------------

def _is(value: np.ndarray | None, target: float, negative_zero: bool | None = None) -> bool:
    """``value == target``; for a zero target, ``negative_zero`` also fixes its sign."""
    if value is None or value != target:
        return False
    if negative_zero is None or not dtypes.is_inexact(value.dtype):
        return True
    return bool(np.signbit(np.real(value))) == negative_zero and (
        not dtypes.is_complex(value.dtype) or bool(np.signbit(np.imag(value))) == negative_zero)


def _is_real(dtype: np.dtype) -> bool:
    return not dtypes.is_complex(dtype)


# --- arithmetic identities ---------------------------------------------------------------

@_rule("add")
def _add(eqn: Eqn, ctx: _Context) -> Atom | None:
    x, y = eqn.inputs
    zero_sign = None if dtypes.is_integer(x.aval.dtype) else True  # floats: only -0.0
    for keep, other in ((x, y), (y, x)):
        if _is(ctx.constant(other), 0, zero_sign):
            return keep
    return None


@_rule("sub")
def _sub(eqn: Eqn, ctx: _Context) -> Atom | None:
    x, y = eqn.inputs
    zero_sign = None if dtypes.is_integer(x.aval.dtype) else False
    return x if _is(ctx.constant(y), 0, zero_sign) else None


@_rule("mul")
def _mul(eqn: Eqn, ctx: _Context) -> Atom | None:
    dtype = eqn.inputs[0].aval.dtype
    for keep, other in (eqn.inputs, eqn.inputs[::-1]):
        value = ctx.constant(other)
        if _is(value, 1) and _is_real(dtype):
            return keep
        if _is(value, -1) and _is_real(dtype):
            return ctx.emit("neg", [keep])
        if _is(value, 0) and dtypes.is_integer(dtype):
            return ctx.splat(0, keep.aval)
    return None


@_rule("div")
def _div(eqn: Eqn, ctx: _Context) -> Atom | None:
    x, y = eqn.inputs
    value = ctx.constant(y)
    if value is None or not _is_real(x.aval.dtype):
        return None
    if _is(value, 1):
        return x
    if dtypes.is_floating(x.aval.dtype) and _is_power_of_two(value):
        reciprocal = np.asarray(1, value.dtype) / value
        return ctx.emit("mul", [x, ctx.splat(reciprocal, y.aval)])
    return None


def _is_power_of_two(value: np.ndarray) -> bool:
    """A finite power of two whose reciprocal is representable (so x/c == x*(1/c))."""
    wide = float(value)
    if not np.isfinite(wide) or wide == 0 or np.frexp(wide)[0] not in (0.5, -0.5):
        return False
    reciprocal = np.asarray(1, value.dtype) / value
    return bool(np.isfinite(reciprocal)) and float(reciprocal) * wide == 1.0


@_rule("neg")
def _neg(eqn: Eqn, ctx: _Context) -> Atom | None:
    inner = ctx.producer(eqn.inputs[0], "neg")
    return inner.inputs[0] if inner is not None else None


@_rule("max", "min", "and", "or")
def _idempotent(eqn: Eqn, ctx: _Context) -> Atom | None:
    x, y = eqn.inputs
    return x if x is y else None


@_rule("integer_pow")
def _integer_pow(eqn: Eqn, ctx: _Context) -> Atom | None:
    x, y = eqn.inputs[0], eqn.params["y"]
    if y == 0:
        return ctx.splat(1, x.aval)
    if y == 1:
        return x
    if y == 2:
        return ctx.emit("mul", [x, x])
    return None


# --- exp / log ---------------------------------------------------------------------------

_NON_NEGATIVE = ("exp", "exp2", "abs", "logistic", "square")


def _non_negative(atom: Atom, ctx: _Context) -> bool:
    if any(ctx.producer(atom, name) is not None for name in _NON_NEGATIVE):
        return True
    power = ctx.producer(atom, "integer_pow")
    return power is not None and power.params["y"] % 2 == 0


@_rule("exp")
def _exp(eqn: Eqn, ctx: _Context) -> Atom | None:
    log = ctx.producer(eqn.inputs[0], "log")
    if log is None or not dtypes.is_floating(eqn.inputs[0].aval.dtype):
        return None
    return log.inputs[0] if _non_negative(log.inputs[0], ctx) else None


@_rule("log")
def _log(eqn: Eqn, ctx: _Context) -> Atom | None:
    exp = ctx.producer(eqn.inputs[0], "exp")
    if exp is None or not dtypes.is_floating(eqn.inputs[0].aval.dtype):
        return None
    return exp.inputs[0]


# --- layout ------------------------------------------------------------------------------

@_rule("transpose")
def _transpose(eqn: Eqn, ctx: _Context) -> Atom | None:
    x, permutation = eqn.inputs[0], tuple(eqn.params["permutation"])
    inner = ctx.producer(x, "transpose")
    if inner is not None:
        x, first = inner.inputs[0], inner.params["permutation"]
        permutation = tuple(first[p] for p in permutation)
    moved = [p for p in permutation if x.aval.shape[p] != 1]
    if moved == sorted(moved):  # only size-1 axes move: the identity or a reshape
        return _reshaped(x, eqn.outputs[0].aval.shape, ctx)
    return ctx.emit("transpose", [x], permutation=permutation) if inner is not None else None


def _reshape_source(atom: Atom, ctx: _Context) -> Atom | None:
    """The operand of a row-major reshape producing ``atom``, if that is how it is made."""
    for name in ("reshape", "squeeze", "broadcast_in_dim"):
        eqn = ctx.producer(atom, name)
        if eqn is not None and _is_reshape(eqn):
            return eqn.inputs[0]
    return None


def _is_reshape(eqn: Eqn) -> bool:
    """True for reshape, squeeze, and broadcasts that only insert size-1 axes."""
    if eqn.prim.name != "broadcast_in_dim":
        return True
    x, out = eqn.inputs[0].aval, eqn.outputs[0].aval
    return x.size == out.size > 0


def _reshaped(x: Atom, shape: tuple[int, ...], ctx: _Context) -> Atom:
    """``x`` reshaped (row-major) to ``shape``, reading past the reshapes that made it."""
    source = _reshape_source(x, ctx) or x
    if source.aval.shape == shape:
        return source
    return ctx.emit("reshape", [source], new_sizes=shape)


@_rule("reshape", "squeeze")
def _collapse_reshapes(eqn: Eqn, ctx: _Context) -> Atom | None:
    """One reshape (or none) for a chain; squeezes and unit broadcasts become reshapes."""
    x, shape = eqn.inputs[0], eqn.outputs[0].aval.shape
    if eqn.prim.name == "reshape" and x.aval.shape != shape and _reshape_source(x, ctx) is None:
        return None  # already a single reshape
    return _reshaped(x, shape, ctx)


@_rule("broadcast_in_dim")
def _broadcast(eqn: Eqn, ctx: _Context) -> Atom | None:
    if _is_reshape(eqn):
        return _collapse_reshapes(eqn, ctx)
    inner = ctx.producer(eqn.inputs[0], "broadcast_in_dim")
    if inner is None:
        return None
    outer_dims = eqn.params["broadcast_dimensions"]
    dims = tuple(outer_dims[d] for d in inner.params["broadcast_dimensions"])
    return ctx.emit("broadcast_in_dim", [inner.inputs[0]], shape=eqn.params["shape"],
                    broadcast_dimensions=dims)


@_rule("convert_element_type")
def _convert(eqn: Eqn, ctx: _Context) -> Atom | None:
    x = eqn.inputs[0]
    return x if x.aval.dtype == eqn.outputs[0].aval.dtype else None


@_rule("select_n")
def _select(eqn: Eqn, ctx: _Context) -> Atom | None:
    which, *cases = eqn.inputs
    if all(case is cases[0] for case in cases):
        return cases[0]
    value = ctx.constant(which)
    if value is None:
        return None
    return cases[int(np.clip(int(value), 0, len(cases) - 1))]


@_rule("stop_gradient")
def _stop_gradient(eqn: Eqn, ctx: _Context) -> Atom | None:
    return eqn.inputs[0]
