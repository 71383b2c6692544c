"""debug_nans for compiled programs: find the first operation that produced a NaN.

Compiled kernels are fused, so a NaN in an output does not say where it came from.
As JAX does, Ember then re-runs the unoptimized graph equation by equation on the
reference implementations and reports the first equation whose output has a NaN
that none of its inputs had.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.core import dtypes
from ember.errors import NaNError
from ember.ir.graph import Graph, Literal, Var


def _has_nan(value: Any) -> bool:
    array = np.asarray(value)
    return dtypes.is_inexact(array.dtype) and bool(np.isnan(array).any())


def check_nans_in_outputs(graph: Graph, host_inputs: Sequence[np.ndarray],
                          outputs: Sequence[Any]) -> None:
    if not any(_has_nan(o) for o in outputs):
        return
    env: dict[Var, Any] = dict(zip(graph.constvars, [np.asarray(c) for c in graph.constvals]))
    env.update(zip(graph.inputs, host_inputs))

    def read(atom):
        return atom.value if isinstance(atom, Literal) else env[atom]

    for eqn in graph.eqns:
        ins = [read(a) for a in eqn.inputs]
        outs = eqn.prim.impl_rule(*ins, **eqn.params)
        outs = outs if eqn.prim.multiple_results else [outs]
        if any(_has_nan(o) for o in outs) and not any(_has_nan(i) for i in ins):
            where = f"\n  (at {eqn.source})" if eqn.source else ""
            raise NaNError(f"debug_nans: primitive '{eqn.prim.name}' produced a NaN{where}")
        env.update(zip(eqn.outputs, outs))
    raise NaNError("debug_nans: the compiled program returned a NaN (an input contained it)")
