"""The ways a program is run, each written as the line of code that runs it.

A target's ``code`` is evaluated with ``subject`` (the function under test) and ``args``
in scope, and the same line goes into a reproducer, so a reported failure reruns
exactly what the fuzzer ran. The oracle is always ``ORACLE``: the reference backend,
op by op.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

import ember
from ember.config import config
from ember.core.pytree import tree_flatten
from ember.ir.interpreter import eval_graph
from ember.ir.parser import parse_graph
from ember.ir.printer import print_graph, var_names
from ember.passes.pipeline import run_pipeline
from ember.runtime.devices import available_backends


@dataclass(frozen=True)
class Target:
    """``code`` runs ``subject`` on ``args``. A target that ``rounds_every_op`` (the
    reference interpreting a graph) must match the oracle; the others may compute
    float16 / bfloat16 in float32 (see ``ember.fuzz.compare``)."""

    name: str
    code: str
    rounds_every_op: bool = False


def eager(fn: Callable, args: Sequence[Any], backend: str) -> Any:
    """``fn(*args)`` op by op on ``backend``."""
    with config.override(backend=backend):
        return fn(*args)


def _reference_graph(fn: Callable, args: Sequence[Any]):
    graph = ember.jit(fn, backend="reference").lower(*args).graph
    return graph.replace(constvals=[np.asarray(value) for value in graph.constvals])


def optimized_on_reference(fn: Callable, args: Sequence[Any], pipeline: str = "cpu") -> list:
    """The graph of ``fn`` after ``pipeline``'s graph passes, interpreted by the reference:
    isolates the optimizing passes from code generation."""
    graph = run_pipeline(_reference_graph(fn, args), pipeline)
    return eval_graph(graph, [np.asarray(a) for a in args])


def reparsed_on_reference(fn: Callable, args: Sequence[Any]) -> list:
    """The graph of ``fn`` printed, parsed back and interpreted by the reference."""
    graph = _reference_graph(fn, args)
    names = var_names(graph)
    consts = {names[var]: value for var, value in zip(graph.constvars, graph.constvals)}
    reparsed = parse_graph(print_graph(graph), consts)
    return eval_graph(reparsed, [np.asarray(a) for a in args])


def host_leaves(result: Any) -> list[np.ndarray]:
    """Every array in a result (a pytree), as NumPy arrays."""
    return [np.asarray(leaf) for leaf in tree_flatten(result)[0]]


ORACLE = Target("reference:eager", "eager(oracle, args, 'reference')", True)


def all_targets(backends: Sequence[str] | None = None) -> list[Target]:
    """Every backend present, eager and jitted, plus the reference running optimized
    and re-parsed graphs. ``backends`` restricts the backends (the reference stays)."""
    present = available_backends()
    chosen = [b for b in present if backends is None or b in backends or b == "reference"]
    targets = [Target("reference:jit", "ember.jit(subject, backend='reference')(*args)", True),
               Target("reference:passes", "optimized_on_reference(subject, args)", True),
               Target("reference:reparsed", "reparsed_on_reference(subject, args)", True)]
    for backend in chosen:
        if backend != "reference":
            targets += [Target(f"{backend}:eager", f"eager(subject, args, {backend!r})"),
                        Target(f"{backend}:jit", f"ember.jit(subject, backend={backend!r})(*args)")]
    return targets


def scope() -> dict[str, Any]:
    """What target code may refer to (besides ``subject``, ``oracle`` and ``args``)."""
    return {"ember": ember, "eager": eager, "optimized_on_reference": optimized_on_reference,
            "reparsed_on_reference": reparsed_on_reference}
