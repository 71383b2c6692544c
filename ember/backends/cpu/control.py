"""Control flow (cond, while, scan) between native code: the loop or branch runs on the
host, its bodies are compiled graphs (one native call per iteration) instead of being
interpreted primitive by primitive."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember.ir.graph import Eqn, Graph

Runner = Callable[[Sequence[Any]], list]
Compile = Callable[[Graph], Any]  # graph -> executable with .run(buffers)


def control_runner(eqn: Eqn, compile_graph: Compile) -> Runner | None:
    """A host implementation of ``eqn`` running compiled bodies, or None if not control flow."""
    builder = _BUILDERS.get(eqn.prim.name)
    return builder(eqn.params, compile_graph) if builder is not None else None


def _cond(params: dict, compile_graph: Compile) -> Runner:
    branches = [compile_graph(graph) for graph in params["branches"]]

    def run(values: Sequence[Any]) -> list:
        index = int(np.clip(np.asarray(values[0]), 0, len(branches) - 1))
        return branches[index].run(list(values[1:]))

    return run


def _while(params: dict, compile_graph: Compile) -> Runner:
    cond, body = compile_graph(params["cond_graph"]), compile_graph(params["body_graph"])
    n_cond, n_body = params["cond_nconsts"], params["body_nconsts"]

    def run(values: Sequence[Any]) -> list:
        cond_consts = list(values[:n_cond])
        body_consts = list(values[n_cond:n_cond + n_body])
        carry = list(values[n_cond + n_body:])
        while bool(np.asarray(cond.run(cond_consts + carry)[0])):
            carry = body.run(body_consts + carry)
        return carry

    return run


def _scan(params: dict, compile_graph: Compile) -> Runner:
    body = compile_graph(params["body"])
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    length, reverse = params["length"], params["reverse"]
    ys_avals = params["body"].out_avals[n_carry:]

    def run(values: Sequence[Any]) -> list:
        consts = list(values[:n_consts])
        carry = list(values[n_consts:n_consts + n_carry])
        xs = [np.asarray(x) for x in values[n_consts + n_carry:]]
        ys = [np.empty((length, *a.shape), a.dtype) for a in ys_avals]
        for i in (range(length - 1, -1, -1) if reverse else range(length)):
            outs = body.run(consts + carry + [x[i] for x in xs])
            carry = outs[:n_carry]
            for y, value in zip(ys, outs[n_carry:]):
                y[i] = value
        return [*carry, *ys]

    return run


_BUILDERS = {"cond": _cond, "while": _while, "scan": _scan}
