"""The random program generator.

``generate(choices)`` builds a ``Program`` step by step: it picks an operation family
(see ``ember.fuzz.ops``), an operand from the values computed so far, and lets the
family write one line of Ember code. Every line is type-checked by tracing it with
Ember itself before it is kept, so a family only has to propose plausible parameters;
the output shape and dtype come from Ember's own abstract evaluation.
"""
from __future__ import annotations

import collections
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.staging import trace_to_graph
from ember.errors import EmberError
from ember.fuzz.choices import Choices, chance, pick
from ember.fuzz.program import DATA, Input, Program, Step, namespace

DTYPES = tuple(d for d in (dtypes.float32, dtypes.int32, dtypes.float16, dtypes.bfloat16,
                           dtypes.bool_) if d is not None)
"""The dtypes programs use, simplest first."""

# Lines Ember rejected with an error that is not an Ember error: (expression, error type).
# Those are bugs in Ember's input checking; the campaign summary lists them.
unexpected_rejections: collections.Counter = collections.Counter()


@dataclass(frozen=True)
class Limits:
    max_steps: int = 8
    max_rank: int = 3
    max_dim: int = 5
    families: tuple[str, ...] | None = None  # None: every family


DEFAULT_LIMITS = Limits()


@functools.lru_cache(maxsize=8192)
def typecheck(expr: str, avals: tuple[ShapedArray, ...]) -> ShapedArray | None:
    """The output type of ``expr`` applied to values of ``avals``, or None if Ember
    rejects it (or it does not produce exactly one array)."""
    params = [f"p{i}" for i in range(len(avals))]
    try:
        fn = eval(f"lambda {', '.join(params)}: {expr.format(*params)}", namespace())
        graph = trace_to_graph(lambda *args: [fn(*args)], list(avals))
    except EmberError:
        return None
    except Exception as error:  # noqa: BLE001 - recorded and reported, see above
        unexpected_rejections[(expr, type(error).__name__)] += 1
        return None
    return graph.out_avals[0]


class Builder:
    """The program under construction: its inputs, steps and the choices driving it."""

    def __init__(self, choices: Choices, limits: Limits) -> None:
        self.choices = choices
        self.limits = limits
        self.inputs: list[Input] = []
        self.steps: list[Step] = []
        self._avals: dict[str, ShapedArray] = {}

    # --- random building blocks ---------------------------------------------------------
    def dim(self) -> int:
        return 0 if chance(self.choices, 4) else self.choices.integer(1, self.limits.max_dim)

    def shape(self) -> tuple[int, ...]:
        return tuple(self.dim() for _ in range(self.choices.integer(0, self.limits.max_rank)))

    def dtype(self) -> np.dtype:
        return pick(self.choices, DTYPES)

    # --- values ----------------------------------------------------------------------
    def aval(self, name: str) -> ShapedArray:
        return self._avals[name]

    def names(self, accept: Callable[[ShapedArray], bool] = lambda aval: True) -> list[str]:
        return [name for name, aval in self._avals.items() if accept(aval)]

    def new_input(self, aval: ShapedArray, kind: str = DATA, low: int = 0, high: int = 0) -> str:
        name = f"x{len(self.inputs)}"
        edges = kind == DATA and chance(self.choices, 30)
        self.inputs.append(Input(name, aval, kind, edges, low, high))
        self._avals[name] = aval
        return name

    def value_of(self, aval: ShapedArray, fresh_percent: int = 50) -> str:
        """A value of type ``aval``: an existing one, or a new input."""
        known = self.names(lambda a: a == aval)
        if known and not chance(self.choices, fresh_percent):
            return pick(self.choices, known)
        return self.new_input(aval)

    def index_input(self, shape: tuple[int, ...], low: int, high: int) -> str:
        return self.new_input(ShapedArray(shape, dtypes.int32), "index", low, high)

    # --- steps -----------------------------------------------------------------------
    def emit(self, expr: str, args: tuple[str, ...] = (), tags: frozenset[str] = frozenset()
             ) -> str | None:
        """Keep ``expr`` as a new step if Ember accepts it; its name, or None."""
        out_aval = typecheck(expr, tuple(self._avals[a] for a in args))
        if out_aval is None:
            return None
        name = f"v{len(self.steps)}"
        self.steps.append(Step(name, out_aval, expr, tuple(args), tags))
        self._avals[name] = out_aval
        return name


def generate(choices: Choices, limits: Limits = DEFAULT_LIMITS) -> Program:
    """A random program; every decision comes from ``choices``."""
    from ember.fuzz.ops import FAMILIES

    families = [f for f in FAMILIES if limits.families is None or f.name in limits.families]
    builder = Builder(choices, limits)
    for _ in range(choices.integer(1, 2)):
        builder.new_input(ShapedArray(builder.shape(), builder.dtype()))
    value_seed = choices.integer(0, 2**31 - 1)
    for _ in range(choices.integer(1, limits.max_steps)):
        family = pick(choices, [f for f in families for _ in range(f.weight)])
        candidates = builder.names(family.accepts)
        if candidates:
            family.build(builder, pick(choices, candidates[::-1]))  # recent values first
    return Program(tuple(builder.inputs), tuple(builder.steps), value_seed).without_unused_inputs()
