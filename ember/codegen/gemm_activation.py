"""Activations a GEMM applies as it stores C (include/ember_gemm.h, EMBER_ACTIVATION_*):
the last step of an epilogue, recognized in the graph in the forms ``ember.nn`` writes.

- ``relu``: ``max(x, 0)``;
- ``gelu_tanh``: ``(0.5 * x) * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``;
- ``gelu_erfc``: ``x * (0.5 * erfc(x * -sqrt(1/2)))`` (GELU's exact form).

Operands of ``add``, ``mul`` and ``max`` match in either order; a scalar is a literal or
a broadcast of one, equal to the constant in the literal's own type (float32 or float64,
which the call computes in), or exactly (0, 1/2, 1: a bfloat16 GELU, whose constants are
rounded to 8 bits, stays the graph's own kernel).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ember.ir.graph import Eqn, Literal, Var

# The codes of include/ember_gemm.h.
ACTIVATIONS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erfc": 3}


@dataclass(frozen=True)
class Activation:
    """``result = name(operand)``; ``eqns``: the ids of the equations that compute it."""

    name: str
    operand: Var
    eqns: frozenset[int]


def match_activation(result: Var, producer: Mapping[Var, Eqn]) -> Activation | None:
    """``result`` as an activation of one value, through the equations of ``producer``
    (the epilogue's own), or None."""
    for name, match in (("relu", _relu), ("gelu_tanh", _gelu_tanh), ("gelu_erfc", _gelu_erfc)):
        found = match(_Reader(producer), result)
        if found is not None:
            operand, eqns = found
            return Activation(name, operand, frozenset(eqns))
    return None


class _Reader:
    def __init__(self, producer: Mapping[Var, Eqn]) -> None:
        self.producer = producer

    def eqn(self, atom, name: str, read: set[int]) -> Eqn | None:
        """The producer of ``atom`` when it is a ``name`` equation (noted in ``read``)."""
        eqn = self.producer.get(atom) if isinstance(atom, Var) else None
        if eqn is None or eqn.prim.name != name:
            return None
        read.add(id(eqn))
        return eqn

    def is_scalar(self, atom, value: float, read: set[int]) -> bool:
        """Whether ``atom`` is the scalar ``value`` (noting a broadcast in ``read``)."""
        if isinstance(atom, Literal):
            return _equal(atom, value)
        eqn = self.producer.get(atom) if isinstance(atom, Var) else None
        if eqn is None or eqn.prim.name != "broadcast_in_dim" or not _equal(eqn.inputs[0], value):
            return False
        read.add(id(eqn))
        return True


def _equal(atom, value: float) -> bool:
    if not isinstance(atom, Literal) or atom.aval.shape != ():
        return False
    dtype = atom.aval.dtype
    if float(atom.value) == value:
        return True
    return dtype in (np.float32, np.float64) and dtype.type(atom.value) == dtype.type(value)


def _orders(eqn: Eqn):
    first, second = eqn.inputs
    return ((first, second), (second, first))


def _relu(reader: _Reader, result: Var):
    read: set[int] = set()
    eqn = reader.eqn(result, "max", read)
    if eqn is None:
        return None
    for x, zero in _orders(eqn):
        if isinstance(x, Var) and reader.is_scalar(zero, 0.0, read):
            return x, read
    return None


def _gelu_erfc(reader: _Reader, result: Var):
    top: set[int] = set()
    eqn = reader.eqn(result, "mul", top)
    if eqn is None:
        return None
    for x, half_erfc in _orders(eqn):
        read = set(top)
        scaled = reader.eqn(half_erfc, "mul", read)
        if not isinstance(x, Var) or scaled is None:
            continue
        for half, erfc in _orders(scaled):
            inner = set(read)
            erfc_eqn = reader.eqn(erfc, "erfc", inner)
            if erfc_eqn is None or not reader.is_scalar(half, 0.5, inner):
                continue
            argument = reader.eqn(erfc_eqn.inputs[0], "mul", inner)
            if argument is not None and any(
                    y is x and reader.is_scalar(c, -math.sqrt(0.5), inner)
                    for y, c in _orders(argument)):
                return x, inner
    return None


def _gelu_tanh(reader: _Reader, result: Var):
    top: set[int] = set()
    eqn = reader.eqn(result, "mul", top)
    if eqn is None:
        return None
    for half_x, one_plus in _orders(eqn):
        read = set(top)
        halved = reader.eqn(half_x, "mul", read)
        if halved is None:
            continue
        for half, x in _orders(halved):
            inner = set(read)
            if (isinstance(x, Var) and reader.is_scalar(half, 0.5, inner)
                    and _one_plus_tanh(reader, one_plus, x, inner)):
                return x, inner
    return None


def _one_plus_tanh(reader: _Reader, atom, x: Var, read: set[int]) -> bool:
    """Whether ``atom`` is ``1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))`` (noting its
    equations in ``read`` when it is)."""
    found: set[int] = set()
    plus = reader.eqn(atom, "add", found)
    if plus is None:
        return False
    for one, tanh in _orders(plus):
        inner = set(found)
        tanh_eqn = reader.eqn(tanh, "tanh", inner)
        if tanh_eqn is None or not reader.is_scalar(one, 1.0, inner):
            continue
        scaled = reader.eqn(tanh_eqn.inputs[0], "mul", inner)
        if scaled is None:
            continue
        for c, cubic in _orders(scaled):
            deeper = set(inner)
            if reader.is_scalar(c, math.sqrt(2 / math.pi), deeper) and _cubic(
                    reader, cubic, x, deeper):
                read |= deeper
                return True
    return False


def _cubic(reader: _Reader, atom, x: Var, read: set[int]) -> bool:
    """Whether ``atom`` is ``x + 0.044715 * x**3`` (noting its equations in ``read``)."""
    found: set[int] = set()
    plus = reader.eqn(atom, "add", found)
    if plus is None:
        return False
    for y, term in _orders(plus):
        inner = set(found)
        scaled = reader.eqn(term, "mul", inner) if y is x else None
        if scaled is None:
            continue
        for c, power in _orders(scaled):
            deeper = set(inner)
            cube = reader.eqn(power, "integer_pow", deeper)
            if (cube is not None and cube.params["y"] == 3 and cube.inputs[0] is x
                    and reader.is_scalar(c, 0.044715, deeper)):
                read |= deeper
                return True
    return False
