"""Static analyses of a Graph: flops and bytes accessed (cost_analysis)."""
from __future__ import annotations

import numpy as np

from ember.ir.graph import Graph, Literal, subgraphs


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
