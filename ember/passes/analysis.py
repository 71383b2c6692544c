"""Static analyses of a Graph: flops and bytes accessed (``cost_analysis``) and the
liveness-based peak memory (``memory_analysis``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ember.ir.graph import Atom, Graph, Literal, Var, subgraphs


def _eqn_flops(eqn) -> float:
    name = eqn.prim.name
    out = eqn.outputs[0].aval if eqn.outputs else None
    if name == "dot_general":
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
        lhs = eqn.inputs[0].aval
        k = int(np.prod([lhs.shape[d] for d in lhs_contract], dtype=np.int64))
        return 2.0 * out.size * k
    if name == "conv_general_dilated":
        rhs = eqn.inputs[1].aval
        return 2.0 * out.size * rhs.size / max(rhs.shape[0], 1)
    if name.startswith("reduce_") or name.startswith("argm"):
        return float(eqn.inputs[0].aval.size)
    if out is None:
        return 0.0
    return float(out.size)


def cost_of_graph(graph: Graph) -> dict[str, float]:
    """Flops and bytes accessed if every equation reads its inputs and writes its outputs."""
    flops = 0.0
    bytes_accessed = 0.0
    for eqn in graph.eqns:
        for sub in subgraphs(eqn.params):
            inner = cost_of_graph(sub)
            flops += inner["flops"]
            bytes_accessed += inner["bytes accessed"]
        flops += _eqn_flops(eqn)
        bytes_accessed += sum(a.aval.nbytes for a in eqn.inputs if not isinstance(a, Literal))
        bytes_accessed += sum(v.aval.nbytes for v in eqn.outputs)
    return {"flops": flops, "bytes accessed": bytes_accessed}


@dataclass(frozen=True)
class StepUse:
    """What one step of a program (an equation, a kernel) reads and writes, and the extra
    bytes it needs while it runs (the temporaries of a body it executes)."""

    reads: Sequence[Atom]
    writes: Sequence[Var]
    inner_bytes: int = 0


def _nbytes(atoms) -> int:
    return sum(atom.aval.nbytes for atom in atoms)


def _inner_bytes(eqn) -> int:
    """Extra memory an equation with nested graphs needs while it runs: the largest
    body's temporaries plus the body outputs it writes before its inputs die."""
    sizes = [peak_memory(sub) for sub in subgraphs(eqn.params)]
    return max((s["temp_bytes"] + s["output_bytes"] for s in sizes), default=0)


def peak_memory(graph: Graph) -> dict[str, int]:
    """Bytes live at the worst point of running ``graph`` equation by equation.

    Counted as XLA's ``memory_analysis`` does: ``argument_bytes`` (inputs and
    constants, live throughout), ``output_bytes`` (the graph's results), ``temp_bytes``
    (the most intermediate bytes live at once) and ``peak_bytes`` (everything live at the
    worst equation). Every value is its own buffer (views and in-place reuse are a
    backend's business, not modelled).
    """
    steps = [StepUse(eqn.inputs, eqn.outputs, _inner_bytes(eqn)) for eqn in graph.eqns]
    return liveness_peak([*graph.constvars, *graph.inputs], graph.outputs, steps)


def last_uses(steps: Sequence[StepUse]) -> dict[Var, int]:
    """The index of the last step that reads or writes each value (``steps``: anything
    with ``reads`` and ``writes``, as ``StepUse`` and ``memory.Step``)."""
    return {atom: index for index, step in enumerate(steps)
            for atom in [*step.reads, *step.writes] if isinstance(atom, Var)}


def liveness_peak(arguments: Sequence[Var], outputs: Sequence[Atom],
                  steps: Sequence[StepUse]) -> dict[str, int]:
    """``peak_memory``'s counts for a program given as steps in order: a value is live
    from the step that writes it until the last one that reads it; the reads and writes
    of a step are live together."""
    arguments = list(dict.fromkeys(arguments))
    argument_set = set(arguments)
    output_vars = {a for a in outputs if isinstance(a, Var)}
    last = last_uses(steps)
    argument_bytes = _nbytes(arguments)
    live_temp = live_out = 0
    peak, temp_peak = argument_bytes, 0
    for index, step in enumerate(steps):
        for var in step.writes:
            if var in output_vars:
                live_out += var.aval.nbytes
            else:
                live_temp += var.aval.nbytes
        peak = max(peak, argument_bytes + live_out + live_temp + step.inner_bytes)
        temp_peak = max(temp_peak, live_temp + step.inner_bytes)
        dying = {v for v in [*step.reads, *step.writes] if isinstance(v, Var)
                 and last[v] == index and v not in argument_set and v not in output_vars}
        live_temp -= _nbytes(dying)
    output_bytes = _nbytes(dict.fromkeys(outputs))
    return {"peak_bytes": max(peak, argument_bytes + output_bytes),
            "argument_bytes": argument_bytes, "output_bytes": output_bytes,
            "temp_bytes": temp_peak}
