"""Variants: the program as is, its gradient, and its vmap.

Each variant is module text defining ``subject`` (what the targets run) and ``oracle``
(what the reference runs eagerly to get the expected result), plus the arguments:

- ``plain``: ``subject = oracle = program``;
- ``grad``: the gradient, with respect to every float input, of the sum of the float
  outputs weighted by random cotangents (random, so that a transposition bug is not
  hidden by all-ones cotangents); not for programs with a ``while_loop`` (not
  reverse-differentiable, as in JAX);
- ``vmap``: ``ember.vmap(program, in_axes)`` over a batch of 2, each input mapped at
  axis 0, at its last axis or not at all; the oracle loops over the batch in NumPy.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ember.core import dtypes
from ember.fuzz.program import Program, function_source, input_value, input_values

VARIANTS = ("plain", "grad", "vmap")
BATCH = 2
_NARROW_TEXT = re.compile(r"\bnp\.float16\b|\bbfloat16\b")
_SINGLE_TEXT = re.compile(r"\bnp\.float16\b|\bbfloat16\b|\bnp\.float32\b")


@dataclass(frozen=True)
class Variant:
    name: str
    source: str
    args: list[np.ndarray]


def make_variant(program: Program, name: str) -> Variant | None:
    """The variant ``name`` of ``program``, or None where it does not apply."""
    return {"plain": _plain, "grad": _grad, "vmap": _vmap}[name](program)


def _plain(program: Program) -> Variant:
    source = function_source(program) + "\nsubject = oracle = program\n"
    return Variant("plain", source, input_values(program))


def _grad(program: Program) -> Variant | None:
    avals = program.avals()
    float_inputs = [i for i, inp in enumerate(program.inputs) if dtypes.is_floating(inp.aval.dtype)]
    float_outputs = [(i, name) for i, name in enumerate(program.outputs())
                     if dtypes.is_floating(avals[name].dtype)]
    if not float_inputs or not float_outputs or program.has_tag("while"):
        return None
    names = [inp.name for inp in program.inputs]
    weights = [f"w{i}" for i, _ in float_outputs]
    lines = [f"def loss({', '.join(names + weights)}):",
             f"    outs = program({', '.join(names)})",
             "    total = np.float32(0)"]
    for (i, name), weight in zip(float_outputs, weights):
        axes = tuple(range(avals[name].ndim))
        lines.append(f"    total = lax.add(total, lax.reduce_sum(lax.mul(lax.convert_element_type("
                     f"outs[{i}], np.float32), {weight}), {axes!r}))")
    lines.append("    return total")
    source = (function_source(program) + "\n" + "\n".join(lines) + "\n\n"
              f"subject = oracle = ember.grad(loss, argnums={tuple(float_inputs)!r})\n")
    rng = np.random.default_rng([program.seed, 7])
    cotangents = [rng.standard_normal(avals[name].shape).astype(np.float32)
                  for _, name in float_outputs]
    return Variant("grad", source, input_values(program) + cotangents)


def _vmap(program: Program) -> Variant:
    rng = np.random.default_rng([program.seed, 11])
    axes = [[None, 0, inp.aval.ndim][rng.integers(0, 3)] for inp in program.inputs]
    if all(axis is None for axis in axes):
        axes[0] = 0
    args = []
    for inp, axis in zip(program.inputs, axes):
        if axis is None:
            args.append(input_value(program, inp))
        else:
            args.append(np.stack([input_value(program, inp, salt) for salt in range(BATCH)],
                                 axis=axis))
    source = function_source(program) + f"""
IN_AXES = {tuple(axes)!r}
subject = ember.vmap(program, in_axes=IN_AXES)


def oracle(*args):
    results = [program(*[a if axis is None else np.take(a, b, axis) for a, axis in
                         zip(args, IN_AXES)]) for b in range({BATCH})]
    return tuple(np.stack([np.asarray(r[i]) for r in results]) for i in range(len(results[0])))
"""
    return Variant("vmap", source, args)


def _narrow(array: np.ndarray) -> bool:
    return array.dtype == dtypes.float16 or dtypes.is_bfloat16(array.dtype)


def _single(array: np.ndarray) -> bool:
    return _narrow(array) or array.dtype == np.float32


def widened(variant: Variant) -> Variant | None:
    """``variant`` computed in float32 wherever it says float16 or bfloat16 (None if it
    never does): what a backend computing half precision in float32 approaches."""
    return _widen(variant, _NARROW_TEXT, _narrow, "np.float32")


def widened_to_double(variant: Variant) -> Variant | None:
    """``variant`` computed in float64 wherever it says a narrower float (None if it
    never does): near the exact values, to tell where a result overflows."""
    return _widen(variant, _SINGLE_TEXT, _single, "np.float64")


def _widen(variant: Variant, text: re.Pattern, narrow: Callable[[np.ndarray], bool],
           wide: str) -> Variant | None:
    if not text.search(variant.source) and not any(map(narrow, variant.args)):
        return None
    return replace(variant, source=text.sub(wide, variant.source),
                   args=[a.astype(wide[3:]) if narrow(a) else a for a in variant.args])
