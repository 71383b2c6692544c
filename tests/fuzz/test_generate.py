"""The program generator: deterministic from its choices, covering every operation
family, producing programs whose declared types are what Ember computes."""
from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.fuzz.choices import (
    HypothesisChoices,
    RandomChoices,
    ReplayChoices,
    permutation,
)
from ember.fuzz.generate import Limits, generate
from ember.fuzz.program import (
    INDEX,
    compile_source,
    function_source,
    input_value,
    input_values,
    values_source,
)

PROGRAMS = [generate(RandomChoices(f"generate:{i}")) for i in range(150)]


def test_same_seed_same_program_and_replay_reproduces_it():
    first = RandomChoices("seed")
    program = generate(first)
    assert generate(RandomChoices("seed")) == program
    assert generate(ReplayChoices(first.recorded)) == program
    assert generate(RandomChoices("other seed")) != program


def test_all_zero_answers_give_a_minimal_program():
    program = generate(ReplayChoices([]))
    assert len(program.steps) == 1 and len(program.inputs) == 1
    assert program.inputs[0].aval.shape == () and program.inputs[0].aval.dtype == np.float32


def test_replay_clamps_answers_into_range():
    replay = ReplayChoices([7, -3])
    assert replay.integer(0, 2) == 2 and replay.integer(5, 9) == 5 and replay.integer(1, 4) == 1
    assert replay.recorded == [2, 0, 0]
    assert sorted(permutation(RandomChoices(3), 5)) == list(range(5))


def test_every_family_and_edge_case_shows_up():
    first_words = collections.Counter(step.expr.split("(")[0] for p in PROGRAMS for step in p.steps)
    for op in ("lax.gather", "lax.scatter_add", "lax.dot_general", "lax.cond", "lax.switch",
               "lax.scan", "lax.while_loop", "lax.fori_loop", "lax.reshape", "lax.transpose",
               "lax.slice", "lax.dynamic_slice", "lax.reduce_sum", "lax.broadcast_in_dim",
               "lax.convert_element_type", "lax.select_n", "lax.sort"):
        assert first_words[op] > 0, op
    avals = [i.aval for p in PROGRAMS for i in p.inputs]
    assert {a.dtype.name for a in avals} == {"float32", "float16", "bfloat16", "int32", "bool"}
    assert any(0 in a.shape for a in avals) and any(1 in a.shape for a in avals)
    assert any(i.kind == INDEX and i.low < 0 for p in PROGRAMS for i in p.inputs)


def test_edge_values_are_mixed_in():
    values = [v for p in PROGRAMS for i, v in zip(p.inputs, input_values(p)) if i.edges]
    floats = np.concatenate([v.astype(np.float64).ravel() for v in values if v.dtype.kind == "f"
                             or v.dtype.name == "bfloat16"])
    assert np.isnan(floats).any() and np.isposinf(floats).any() and np.isneginf(floats).any()
    assert (np.signbit(floats) & (floats == 0)).any()
    ints = np.concatenate([v.ravel() for v in values if v.dtype == np.int32])
    assert ints.min() == np.iinfo(np.int32).min and ints.max() == np.iinfo(np.int32).max


def test_values_depend_on_seed_name_and_salt_only():
    program = next(p for p in PROGRAMS if p.inputs[0].aval.size > 1)
    first = program.inputs[0]
    np.testing.assert_array_equal(input_value(program, first), input_value(program, first))
    assert not np.array_equal(input_value(program, first), input_value(program, first, salt=1))


@pytest.mark.parametrize("index", range(0, 150, 15))
def test_declared_types_are_what_the_program_computes(index):
    program = PROGRAMS[index]
    scope = compile_source(function_source(program) + values_source("args", input_values(program)))
    for value, arg in zip(scope["args"], input_values(program)):
        assert value.dtype == arg.dtype and value.tobytes() == arg.tobytes()
    avals = program.avals()
    outs = scope["program"](*scope["args"])
    assert [(o.shape, o.dtype) for o in outs] == [(avals[n].shape, avals[n].dtype)
                                                for n in program.outputs()]


@given(st.data())
def test_hypothesis_programs_respect_the_limits(data):
    limits = Limits(max_steps=3, max_rank=2, max_dim=3, families=("unary", "binary", "reduce"))
    program = generate(HypothesisChoices(data), limits)
    assert 1 <= len(program.steps) <= 3
    assert all(i.aval.ndim <= 2 and max(i.aval.shape, default=0) <= 3 for i in program.inputs)
    other_families = ("gather", "scatter", "scan", "cond", "switch", "dot_general", "loop",
                      "reshape", "sort", "slice", "select_n")
    assert not any(word in step.expr for step in program.steps for word in other_families)
