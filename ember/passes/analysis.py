"""Static analyses of a Graph: flops and bytes accessed (``cost_analysis``) and the
liveness-based peak memory (``memory_analysis``)."""
from __future__ import annotations

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


def _last_uses(graph: Graph) -> dict[Var, int]:
    """Index of the last equation reading each variable (outputs: past the end)."""
    last: dict[Var, int] = {}
    for index, eqn in enumerate(graph.eqns):
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                last[atom] = index
    for atom in graph.outputs:
        if isinstance(atom, Var):
            last[atom] = len(graph.eqns)
    return last


def _nbytes(atoms: list[Atom]) -> int:
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
    worst equation). A value is live from the equation that writes it until the last one
    that reads it; inputs and outputs of an equation are live together. Every value is
    its own buffer (views and in-place reuse are a backend's business, not modelled).
    """
    arguments = list(dict.fromkeys([*graph.constvars, *graph.inputs]))
    argument_set = set(arguments)
    output_vars = {a for a in graph.outputs if isinstance(a, Var)}
    last = _last_uses(graph)
    argument_bytes = _nbytes(arguments)
    live_temp = live_out = 0
    peak, temp_peak = argument_bytes, 0
    for index, eqn in enumerate(graph.eqns):
        for var in eqn.outputs:
            if var in output_vars:
                live_out += var.aval.nbytes
            else:
                live_temp += var.aval.nbytes
        inner = _inner_bytes(eqn)
        peak = max(peak, argument_bytes + live_out + live_temp + inner)
        temp_peak = max(temp_peak, live_temp + inner)
        dying = {v for v in [*eqn.inputs, *eqn.outputs] if isinstance(v, Var)
                 and last.get(v, index) == index and v not in argument_set
                 and v not in output_vars}
        live_temp -= _nbytes(list(dying))
    output_bytes = _nbytes(list(dict.fromkeys(graph.outputs)))
    return {"peak_bytes": max(peak, argument_bytes + output_bytes),
            "argument_bytes": argument_bytes, "output_bytes": output_bytes,
            "temp_bytes": temp_peak}
