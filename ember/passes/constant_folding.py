"""Constant folding: compute at compile time what depends only on constants.

Three kinds of known values flow through the graph:

- *literals* (scalars written in equations);
- *small constants*: graph constants on the host, and folded results, with at most
  ``FOLD_LIMIT`` elements (larger ones are never materialized nor read);
- *splats*: ``broadcast_in_dim`` of a scalar, kept lazy as that one equation. An
  elementwise equation on splats becomes one splat of the computed scalar; a reshape,
  transpose, slice, ... of a splat becomes a splat of the new shape. So ``ones((4096,
  4096)) * 2 + 1`` folds to one broadcast of ``3.0``, never to a 64 MiB constant.

Folding runs each primitive's reference implementation, so results are bit-identical
to the unoptimized program on the reference backend. Equations holding nested graphs
are not folded themselves; their bodies are folded inside (where results can only
become literals or splats: bodies have no constants). Folded constants are NumPy
arrays: a backend with device memory uploads ``graph.constvals`` as it does the others.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core.abstract import ShapedArray
from ember.ir.graph import Atom, Eqn, Graph, Literal, Var, subgraphs
from ember.ir.interpreter import as_numpy
from ember.ops.elementwise import ELEMENTWISE
from ember.ops.structural import broadcast_in_dim_p
from ember.passes.rewrite import in_subgraphs, substitute_inputs, substitute_outputs

FOLD_LIMIT = 1024  # most elements of a constant that folding reads or materializes

# Primitives whose output is a splat whenever their first operand is one.
SPLAT_PRESERVING = frozenset({"broadcast_in_dim", "reshape", "transpose", "squeeze", "rev",
                              "slice", "dynamic_slice"})


def fold_constants(graph: Graph) -> Graph:
    """``graph`` with constant subexpressions computed (see the module docstring)."""
    return _Folder(graph, may_add_constants=True).run()


def _fold_body(graph: Graph) -> Graph:
    return _Folder(graph, may_add_constants=False).run()


class _Folder:
    def __init__(self, graph: Graph, may_add_constants: bool) -> None:
        self.graph = graph
        # Constants can be added to a top-level graph whose constant values are all given.
        self.may_add_constants = may_add_constants and \
            len(graph.constvals) == len(graph.constvars)
        self.values: dict[Var, np.ndarray] = {}
        self.splats: dict[Var, np.ndarray] = {}
        self.env: dict[Var, Atom] = {}
        self.eqns: list[Eqn] = []
        self.constvars = list(graph.constvars)
        self.constvals = list(graph.constvals)
        for var, value in zip(graph.constvars, graph.constvals):
            if isinstance(value, (np.ndarray, np.generic)) and var.aval.size <= FOLD_LIMIT:
                self.values[var] = np.asarray(value)

    def run(self) -> Graph:
        for eqn in self.graph.eqns:
            eqn = in_subgraphs(substitute_inputs(eqn, self.env), _fold_body)
            self._visit(eqn)
        graph = self.graph.replace(constvars=self.constvars, constvals=self.constvals)
        return substitute_outputs(graph, self.eqns, self.env)

    # --- what is known of an atom ---------------------------------------------------
    def _value(self, atom: Atom) -> np.ndarray | None:
        if isinstance(atom, Literal):
            return atom.value
        value = self.values.get(atom)
        if value is None and atom in self.splats and atom.aval.size <= FOLD_LIMIT:
            value = np.broadcast_to(self.splats[atom], atom.aval.shape)
        return value

    def _scalar(self, atom: Atom) -> np.ndarray | None:
        if isinstance(atom, Literal):
            return atom.value
        if atom in self.splats:
            return self.splats[atom]
        value = self.values.get(atom)
        return value.reshape(()) if value is not None and value.size == 1 else None

    # --- folding --------------------------------------------------------------------
    def _visit(self, eqn: Eqn) -> None:
        if eqn.prim is broadcast_in_dim_p and isinstance(eqn.inputs[0], Literal):
            self.splats[eqn.outputs[0]] = eqn.inputs[0].value  # a splat: keep it lazy
        elif eqn.prim.impl_rule is not None and not eqn.prim.effectful and \
                not any(subgraphs(eqn.params)) and (
                self._fold_splat(eqn) or self._fold_values(eqn)):
            return
        self.eqns.append(eqn)

    def _fold_splat(self, eqn: Eqn) -> bool:
        """Fold into a splat; True if done."""
        name, out = eqn.prim.name, eqn.outputs[0]
        if name in SPLAT_PRESERVING and eqn.inputs and out.aval.shape != ():
            scalar = self._scalar(eqn.inputs[0])
        elif name in ELEMENTWISE and out.aval.shape != ():
            scalars = [self._scalar(atom) for atom in eqn.inputs]
            if any(s is None for s in scalars):
                return False
            scalar = _apply(eqn, scalars)[0]
        else:
            return False
        if scalar is None:
            return False
        self._emit_splat(eqn, np.asarray(scalar).reshape(()))
        return True

    def _emit_splat(self, eqn: Eqn, scalar: np.ndarray) -> None:
        out = eqn.outputs[0]
        literal = Literal(scalar, ShapedArray((), out.aval.dtype))
        params = dict(shape=out.aval.shape, broadcast_dimensions=())
        self.eqns.append(Eqn(broadcast_in_dim_p, [literal], [out], params, eqn.source))
        self.splats[out] = literal.value

    def _fold_values(self, eqn: Eqn) -> bool:
        """Fold into literals and small constants; True if done."""
        if any(var.aval.size > FOLD_LIMIT for var in eqn.outputs):
            return False
        values = [self._value(atom) for atom in eqn.inputs]
        if not values or any(v is None for v in values):
            return False  # generators (iota) stay lazy, like splats
        results = [np.array(r) for r in _apply(eqn, values)]  # own, contiguous copies
        if not self.may_add_constants and any(v.aval.shape != () for v in eqn.outputs):
            self.values.update(zip(eqn.outputs, results))  # known, but kept computed
            return False
        for var, value in zip(eqn.outputs, results):
            if var.aval.shape == ():
                self.env[var] = Literal(value, var.aval)
            else:
                self.constvars.append(var)
                self.constvals.append(value)
                self.values[var] = value
        return True



def _apply(eqn: Eqn, values: list[Any]) -> list[np.ndarray]:
    """Run the reference implementation; results in the dtypes the equation declares."""
    outs = eqn.prim.impl_rule(*values, **eqn.params)
    outs = outs if eqn.prim.multiple_results else [outs]
    return [as_numpy(out, var.aval.dtype) for out, var in zip(outs, eqn.outputs)]
