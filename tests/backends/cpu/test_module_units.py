"""A large C module is compiled as several translation units in parallel: how steps are
cut into units, and that a split program computes exactly what the whole one does."""
from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_testing import assert_same, is_program, requires_cpu

import ember
import ember.numpy as jnp
from ember.backends.cpu import toolchain
from ember.compiler import c_module as module
from ember.config import config

pytestmark = requires_cpu

rng = np.random.default_rng(3)
x = rng.standard_normal((64, 96)).astype(np.float32)
w = rng.standard_normal((96, 96)).astype(np.float32)


def test_parts_are_contiguous_balanced_and_within_segments():
    costs = [10, 10, 10, 10, 10, 10, 0, 10, 10]
    segments = [[0, 1, 2, 3, 4, 5], [7, 8]]  # step 6 is a host call
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "MIN_UNIT_COST", 1)
        parts = module._parts(segments, costs, max_units=2)
        assert parts == [(0, [0, 1, 2, 3]), (1, [4, 5]), (1, [7, 8])]
        assert module._parts(segments, costs, max_units=1) == [(0, [0, 1, 2, 3, 4, 5]),
                                                                (0, [7, 8])]
        patch.setattr(module, "MIN_UNIT_COST", 50)
        assert {unit for unit, _ in module._parts(segments, costs, max_units=8)} == {0}


def test_the_gemm_steps_share_a_unit_that_pays_for_the_wrapper_once():
    costs = [10, 30, 10, 30, 10, 10, 10]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "MIN_UNIT_COST", 10)
        # steps 1 and 3 (GEMMs) in unit 0 with 100 of the 150; the others fill unit 1
        parts = module._parts([list(range(7))], costs, max_units=2, gemms={1, 3},
                              gemm_wrapper_cost=40)
        assert parts == [(1, [0]), (0, [1]), (1, [2]), (0, [3]), (1, [4, 5, 6])]
        # the GEMM-free steps are too few for a compiler run of their own
        patch.setattr(module, "MIN_UNIT_COST", 60)
        parts = module._parts([list(range(7))], costs, max_units=2, gemms={1, 3},
                              gemm_wrapper_cost=40)
        assert {unit for unit, _ in parts} == {0}


def test_a_linked_gemm_wrapper_leaves_room_for_kernels_in_the_gemm_unit():
    costs = [10] * 7
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "MIN_UNIT_COST", 10)
        compiled = module._parts([list(range(7))], costs, max_units=2, gemms={1},
                                 gemm_wrapper_cost=40)
        assert compiled == [(1, [0]), (0, [1]), (1, [2, 3, 4, 5, 6])]  # 50 and 60
        linked = module._parts([list(range(7))], costs, max_units=2, gemms={1},
                               gemm_wrapper_cost=0)
        assert linked == [(0, [0, 1, 2]), (1, [3, 4, 5, 6])]  # 30 and 40


def network(a, b):
    h = jnp.tanh(a @ b + 1.0)
    h = jnp.exp(-h * h) @ b
    h = h / (jnp.sum(h * h, axis=1, keepdims=True) + 1.0)  # (a divisor never near 0)
    return jnp.log1p(jnp.abs(h) @ b), jnp.max(h, axis=0)


def with_host_call(a, b):
    h = jnp.tanh(a @ b)
    h = jnp.sort(h, axis=0)  # a host call: the program has two native segments
    return jnp.exp(h @ b) * 0.5


def _compile_with_units(tmp_path, monkeypatch, fun, max_units):
    """Results and the units the C compiler got, compiling into a private cache."""
    seen = []
    compile_library = toolchain.compile_shared_library

    def recording(source, **kwargs):
        if is_program(kwargs["name"]):
            seen.append(source)
        return compile_library(source, **kwargs)

    monkeypatch.setattr(toolchain, "compile_shared_library", recording)
    monkeypatch.setattr(toolchain, "parallel_jobs", lambda: max_units)
    monkeypatch.setattr(module, "MIN_UNIT_COST", 1)
    with config.override(cache_dir=str(tmp_path / f"cache-{max_units}")):
        out = ember.jit(fun, backend="cpu")(x, w)
    monkeypatch.undo()
    return [np.asarray(o) for o in ember.tree_util.tree_leaves(out)], seen[-1]


@pytest.mark.parametrize("fun", [network, with_host_call])
def test_a_split_module_computes_what_the_whole_one_does(tmp_path, monkeypatch, fun):
    whole, units = _compile_with_units(tmp_path, monkeypatch, fun, 1)
    assert len(units) == 1 and "ember_part_" not in units[0]
    split, units = _compile_with_units(tmp_path, monkeypatch, fun, 3)
    assert len(units) > 1
    assert sum('#include "ember_gemm.h"' in unit for unit in units) == 1  # (GEMMs share one)
    assert sum("void run(" in unit for unit in units) == 1 and "void run(" in units[-1]
    for got, want in zip(split, whole):
        np.testing.assert_array_equal(got, want)
    reference = ember.tree_util.tree_leaves(ember.jit(fun, backend="reference")(x, w))
    for got, want in zip(split, reference):
        assert_same(got, want, tolerance=(1e-4, 1e-5))


def recurrence(a, b):
    """Four steps, each reading its own slice of one stacked input: kernels that differ
    only in where they start in it."""
    stacked = jnp.exp(a)  # [64, 96]: 4 slices of 16 rows
    h = a[:16]
    for step in range(4):
        z = stacked[16 * step:16 * (step + 1)]
        h = jnp.tanh(h @ b) * (1.0 / (1.0 + jnp.exp(-z))) + z * 0.5
    return h


@pytest.mark.parametrize("max_units", [1, 3])
def test_kernels_that_differ_only_in_their_offsets_are_compiled_once(
        tmp_path, monkeypatch, max_units):
    [got], units = _compile_with_units(tmp_path, monkeypatch, recurrence, max_units)
    source = "\n".join(units)
    defined = re.findall(r"^(?:static |__attribute__.* )?void (\w+)\(.*\{$", source,
                         re.MULTILINE)
    defined = [name for name in defined if name != "run" and "ember_part_" not in name]
    called = {name for name in re.findall(r"^[ \t]+(\w+)\(.*\);$", source, re.MULTILINE)
              if name != "ember_gemm_f32" and "ember_part_" not in name}
    assert len(defined) == len(set(defined))  # (each defined in one unit only)
    compiled = ember.jit(recurrence, backend="cpu").lower(x, w).compile()
    kernels = [k for k in compiled.kernels if "static void" in k.source]  # (C of its own)
    assert len(kernels) == 5 and len(defined) == 2  # the steps' epilogues share one
    assert called <= set(defined)
    reference = ember.jit(recurrence, backend="reference")(x, w)
    assert_same(got, np.asarray(reference), tolerance=(1e-4, 1e-5))


def three_layers(a, b):
    """The same layer on three lines: kernels that differ only in the lines they name."""
    h = a * 2.0
    h = jnp.tanh(h @ b) * 0.5 + jnp.exp(-h)
    h = jnp.tanh(h @ b) * 0.5 + jnp.exp(-h)
    h = jnp.tanh(h @ b) * 0.5 + jnp.exp(-h)
    return h


def test_kernels_that_differ_only_in_their_source_lines_are_compiled_once(tmp_path,
                                                                         monkeypatch):
    [got], [unit] = _compile_with_units(tmp_path, monkeypatch, three_layers, 1)
    defined = re.findall(r"^(?:static |__attribute__.* )?void (\w+)\(.*\{$", unit,
                         re.MULTILINE)
    compiled = ember.jit(three_layers, backend="cpu").lower(x, w).compile()
    layers = [k for k in compiled.kernels if "static void" in k.source and "gemm" in k.name]
    lines = {tuple(re.findall(r"// .* at (\S+)", k.source)) for k in layers}
    assert len(layers) == 3 and len(lines) == 3  # (each shows its own line)
    # (the first two compiled once; the last writes the program's output, not the arena)
    assert len([name for name in defined if "gemm" in name]) == 2
    reference = ember.jit(three_layers, backend="reference")(x, w)
    assert_same(got, np.asarray(reference), tolerance=(1e-4, 1e-5))
