"""Every elementwise primitive, jitted on 'cpu' vs the reference backend, for every dtype
it accepts, on edge values (NaN, ±inf, ±0, extremes, shift counts, zero divisors).

All primitives that accept a dtype go into one jitted function, so each dtype costs one
C compile; every pair of edge values (x, y) is one element."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from cpu_testing import assert_same, requires_cpu, run_both

import ember
from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.errors import EmberError
from ember.ops import elementwise as ew

pytestmark = requires_cpu

SPECIAL = ("select_n", "clamp", "convert_element_type", "integer_pow", "round")
FLOAT_VALUES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, 100.0,
                -100.0, 1e-30, 7e4]
INT_EXTRA = [0, 1, -1, 2, 3, 7, 31, 32, 63, 64, -3]


def _accepts(prim, arity: int, dtype: np.dtype) -> bool:
    try:
        prim.abstract_eval(*[ShapedArray((), dtype)] * arity)
    except (EmberError, TypeError):
        return False
    return True


def ops_for(dtype: np.dtype) -> tuple[list[str], list[str]]:
    unary = [n for n, p in ew.ELEMENTWISE.items() if n not in SPECIAL and _accepts(p, 1, dtype)]
    binary = [n for n, p in ew.ELEMENTWISE.items() if n not in SPECIAL and _accepts(p, 2, dtype)]
    return unary, binary


def edge_values(dtype: np.dtype) -> np.ndarray:
    if dtypes.is_bool(dtype):
        return np.array([False, True])
    if dtypes.is_integer(dtype):
        info = np.iinfo(dtype)
        values = {info.min, info.max, info.min + 1, info.max - 1}
        values |= {v for v in INT_EXTRA if info.min <= v <= info.max}
        return np.array(sorted(values), dtype=dtype)
    with np.errstate(over="ignore"):
        return np.array(FLOAT_VALUES, dtype=dtype)


def all_pairs(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    values = edge_values(dtype)
    x, y = zip(*itertools.product(values, values))
    return np.array(x, dtype=dtype), np.array(y, dtype=dtype)


def every_op(unary: list[str], binary: list[str], dtype: np.dtype):
    def fun(x, y):
        outs = {name: ew.ELEMENTWISE[name].bind(x) for name in unary}
        outs.update({f"{name}2": ew.ELEMENTWISE[name].bind(x, y) for name in binary})
        if not dtypes.is_bool(dtype):
            outs["select"] = ew.select_n(ew.lt(x, y), x, y)
            outs["clamp"] = ew.clamp(y, x, y + y)
            for power in (0, 1, 2, 3, 5):
                outs[f"pow{power}"] = ew.integer_pow(x, power)
        if dtypes.is_floating(dtype):
            outs["pow-2"] = ew.integer_pow(x, -2)
            outs["round_even"] = ew.round(x, 1)
            outs["round_away"] = ew.round(x, 0)
        for target in _conversion_targets():
            outs[f"to_{target.name}"] = ew.convert_element_type(x, target)
        return outs

    return fun


def _conversion_targets() -> list[np.dtype]:
    targets = [dtypes.bool_, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32,
               dtypes.float16, dtypes.float32]
    if dtypes.bfloat16 is not None:
        targets.append(dtypes.bfloat16)
    if ember.config.enable_x64:
        targets += [dtypes.int64, dtypes.uint64, dtypes.float64]
    return targets


def check_every_op(dtype: np.dtype) -> None:
    unary, binary = ops_for(dtype)
    x, y = all_pairs(dtype)
    cpu, reference = run_both(every_op(unary, binary, dtype), x, y)
    assert set(cpu) == set(reference)
    for name in sorted(reference):
        assert_same(cpu[name], reference[name], what=f"{name} on {dtype.name}")


NARROW = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32"]
if dtypes.bfloat16 is not None:
    NARROW.append("bfloat16")


@pytest.mark.parametrize("name", NARROW)
def test_every_elementwise_op_matches_the_reference(name):
    check_every_op(dtypes.to_dtype(name))


@pytest.mark.parametrize("name", ["int64", "uint64", "float64"])
def test_every_elementwise_op_matches_the_reference_in_x64(x64, name):
    check_every_op(dtypes.to_dtype(name))


def test_each_op_has_a_c_lowering():
    from ember.backends.cpu.backend import vector_math_functions
    from ember.codegen.policy import native
    from ember.codegen.c import CRenderer

    renderer = CRenderer(1, vector_math_functions())
    unary, binary = ops_for(dtypes.float32)
    hosted = [n for n in unary if not renderer.supports(n, dtypes.float32)]
    hosted += [n for n in binary if not renderer.supports(n, dtypes.float32)]
    assert hosted == []
    assert native is not None
