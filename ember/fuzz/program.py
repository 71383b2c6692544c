"""A generated program: typed inputs, a list of steps, and its Python source.

A step is one line of Ember code, ``v3 = lax.add(x0, v2)``, kept as an expression
template (``lax.add({0}, {1})``) plus the names it reads. The program *is* its source:
the runner ``exec``s the text, and a reproducer is the same text written to a file, so
what runs and what is reported cannot drift apart.

Input values are not part of the program: ``input_value`` derives them from the
program's seed and the input's name, with NaN, infinities, -0.0 and integer extremes
sprinkled in when the input asks for edge values.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import Sequence

import ml_dtypes
import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray

DATA, INDEX = "data", "index"


@dataclass(frozen=True)
class Input:
    """A program argument. ``kind`` INDEX draws integers from ``[low, high]`` (indices
    that may be out of bounds); DATA draws values typical of the dtype."""

    name: str
    aval: ShapedArray
    kind: str = DATA
    edges: bool = False
    low: int = 0
    high: int = 0


@dataclass(frozen=True)
class Step:
    """``out = expr.format(*args)``; ``tags`` name properties the runner cares about
    (``"while"``: not reverse-differentiable)."""

    out: str
    aval: ShapedArray
    expr: str
    args: tuple[str, ...]
    tags: frozenset[str] = frozenset()

    def line(self) -> str:
        return f"{self.out} = {self.expr.format(*self.args)}"


@dataclass(frozen=True)
class Program:
    inputs: tuple[Input, ...]
    steps: tuple[Step, ...]
    seed: int = 0

    def avals(self) -> dict[str, ShapedArray]:
        found = {i.name: i.aval for i in self.inputs}
        found.update((s.out, s.aval) for s in self.steps)
        return found

    def outputs(self) -> list[str]:
        """The values no step reads (every computation reaches an output)."""
        read = {name for step in self.steps for name in step.args}
        sinks = [s.out for s in self.steps if s.out not in read]
        return sinks or [i.name for i in self.inputs[:1]]

    def has_tag(self, tag: str) -> bool:
        return any(tag in step.tags for step in self.steps)

    def without_unused_inputs(self) -> Program:
        """The program without the inputs no step reads (all kept when it has no step)."""
        read = {name for step in self.steps for name in step.args}
        if not self.steps:
            return self
        return replace(self, inputs=tuple(i for i in self.inputs if i.name in read))


# --- source ---------------------------------------------------------------------------

PRELUDE = """\
import numpy as np
import ember
from ember import lax
from ml_dtypes import bfloat16
"""


def dtype_source(dtype: np.dtype) -> str:
    """How generated code names ``dtype``."""
    return "bfloat16" if dtypes.is_bfloat16(dtype) else f"np.{np.dtype(dtype).name}"


def function_source(program: Program, name: str = "program") -> str:
    """``def program(x0, x1, ...): ...; return (outputs...,)``."""
    lines = [f"def {name}({', '.join(i.name for i in program.inputs)}):"]
    lines += [f"    {step.line()}" for step in program.steps]
    lines.append(f"    return ({''.join(out + ', ' for out in program.outputs())})")
    return "\n".join(lines) + "\n"


def namespace() -> dict:
    """The globals generated code runs with (what ``PRELUDE`` imports)."""
    scope: dict = {}
    exec(compile(PRELUDE, "<ember-fuzz>", "exec"), scope)
    return scope


def compile_source(source: str, filename: str = "<ember-fuzz>") -> dict:
    """Run generated module text; returns its globals."""
    scope = namespace()
    exec(compile(source, filename, "exec"), scope)
    return scope


# --- values ---------------------------------------------------------------------------

def _float_edges(dtype: np.dtype) -> np.ndarray:
    info = ml_dtypes.finfo(dtype)
    values = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, float(info.max),
              -float(info.max), float(info.smallest_subnormal), float(info.tiny)]
    return np.array(values, dtype=np.float64).astype(dtype)


def _int_edges(dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    bits = dtype.itemsize * 8
    return np.array([info.min, info.max, 0, -1, 1, bits - 1, bits, info.min + 1], dtype=dtype)


def random_values(aval: ShapedArray, rng: np.random.Generator, edges: bool) -> np.ndarray:
    """Values of ``aval``: small normals or integers, with edge values mixed in."""
    shape, dtype = aval.shape, aval.dtype
    if dtypes.is_bool(dtype):
        return np.array(rng.random(shape) < 0.5)
    if dtypes.is_integer(dtype):
        values = np.array(rng.integers(-9, 10, size=shape), dtype=dtype)
        specials = _int_edges(dtype) if edges else None
    else:
        scale = rng.choice([0.5, 1.0, 4.0])
        values = np.array(rng.standard_normal(shape) * scale, dtype=dtype)
        specials = _float_edges(dtype) if edges else None
    if specials is not None:
        mask = rng.random(shape) < 0.3
        values[mask] = rng.choice(specials, size=shape)[mask]
    return values


def input_value(program: Program, inp: Input, salt: int = 0) -> np.ndarray:
    """The value of ``inp``: a pure function of the program seed, its name and ``salt``."""
    rng = np.random.default_rng([program.seed, zlib.crc32(inp.name.encode()), salt])
    if inp.kind == INDEX:
        return np.array(rng.integers(inp.low, inp.high + 1, size=inp.aval.shape), inp.aval.dtype)
    return random_values(inp.aval, rng, inp.edges)


def input_values(program: Program, salt: int = 0) -> list[np.ndarray]:
    return [input_value(program, inp, salt) for inp in program.inputs]


def array_source(value: np.ndarray) -> str:
    """Exact Python text for an array (bit pattern kept: NaN payloads, -0.0)."""
    data = np.asarray(value).tobytes(order="C").hex()
    return (f"np.frombuffer(bytes.fromhex({data!r}), dtype={dtype_source(value.dtype)})"
            f".reshape({tuple(value.shape)!r})")


def values_source(name: str, values: Sequence[np.ndarray]) -> str:
    items = "".join(f"    {array_source(v)},\n" for v in values)
    return f"{name} = [\n{items}]\n"
