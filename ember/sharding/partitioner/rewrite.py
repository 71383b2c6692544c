"""The global Graph rewritten as one per-device SPMD Graph with explicit collectives.

Each equation runs at its shard's shapes, split as its sharding rule decides from its
operands' splits (and, second, its results' propagated splits). An operand whose split
differs from the one the equation runs with is converted, dimension by dimension:

- a mesh axis that moves from one dimension to another: all-to-all;
- a mesh axis no longer wanted: all-gather;
- a mesh axis newly wanted: a local slice at ``axis_index`` (no communication).

A contraction or reduction over a split dimension leaves a partial result. It stays
partial through linear operations (adds of partials, scaling by a replicated value,
transposes, reshapes, sums) and is combined only where a whole value is needed:
reduce-scatter where the consumer wants it split along that mesh axis, else all-reduce.
All values partial over the same axes at that point are summed by one all-reduce on
their concatenation (as XLA's all-reduce combiner and PyTorch DDP's buckets do), so a
data-parallel step all-reduces once, loss and gradients together.

Every inserted collective is recorded with the user's line of the equation that needed
it and the conflict of splits that caused it (``SpmdProgram.explain``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.core.source_info import SourceInfo
from ember.errors import EmberValueError
from ember.ir.graph import Atom, Eqn, Graph, Literal, Var
from ember.ops.collectives import (
    all_gather_p, all_to_all_p, axis_index_p, pmax_p, pmin_p, psum_p, psum_scatter_p)
from ember.ops.elementwise import ELEMENTWISE
from ember.ops.sharding_rules import Dims, ShardingDecision, local_shape
from ember.ops.structural import concatenate_p, dynamic_slice_p, reshape_p, slice_p
from ember.sharding.partitioner.program import Collective, SpmdProgram, describe
from ember.sharding.partitioner.propagation import decide, whole

__all__ = ["rewrite"]

# How a partial sum passes through a linear primitive: "all" its operands are partial
# alike; exactly "one" is, the others replicated over its axes; or only the "first".
_LINEAR = {"neg": "all", "add": "all", "sub": "all", "mul": "one", "div": "first",
           "transpose": "all", "reshape": "all", "squeeze": "all", "reduce_sum": "all",
           "slice": "all", "rev": "all", "convert_element_type": "all"}


@dataclass
class _Local:
    """A global value on each shard: the per-device atom, its split, and the mesh axes
    over which shards hold partial results (combined with ``reduce``)."""

    atom: Atom
    dims: Dims
    partial: tuple[str, ...] = ()
    reduce: str = "sum"


@dataclass(frozen=True)
class _Need:
    """Why a value is converted: for the messages of ``explain``."""

    what: str
    source: SourceInfo | None
    others: tuple[Dims, ...] = ()  # the splits the equation's other operands run with

    def clash(self, axis: str) -> str:
        """Where the equation uses ``axis`` otherwise, if it does."""
        for k, dims in enumerate(self.others):
            for d, axes in enumerate(dims):
                if axis in axes:
                    return f"; mesh axis {axis!r} splits dimension {d} of operand {k} there"
        return ""


class _Rewriter:
    def __init__(self, graph: Graph, mesh: Mapping[str, int], specs: Mapping[Var, Dims]):
        self.graph = graph
        self.mesh = dict(mesh)
        self.specs = specs
        self.eqns: list[Eqn] = []
        self.env: dict[Var, _Local] = {}
        self.collectives: list[Collective] = []
        self.producer: dict[Var, Eqn] = {}
        self.converted: dict[tuple[Var, Dims], _Local] = {}
        self.last_use = _last_uses(graph)
        self.now = 0

    # --- emitting per-device equations -------------------------------------------------
    def emit(self, prim: Primitive, inputs: list[Atom], params: dict,
             source: SourceInfo | None) -> list[Var]:
        avals = prim.abstract_eval(*[a.aval for a in inputs], **params)
        outs = [Var(a) for a in (avals if prim.multiple_results else [avals])]
        self.eqns.append(Eqn(prim, list(inputs), outs, dict(params), source))
        return outs

    def emit1(self, prim: Primitive, inputs: list[Atom], params: dict,
              source: SourceInfo | None) -> Var:
        return self.emit(prim, inputs, params, source)[0]

    def record(self, kind: str, axis: str, local: ShapedArray, need: _Need,
               reason: str, values: int = 1) -> None:
        n = self.mesh[axis]
        nbytes = local.size * np.dtype(local.dtype).itemsize
        factor = {"all-reduce": 2 * (n - 1) / n}.get(kind, (n - 1) / n)
        self.collectives.append(Collective(kind, axis, values, local.shape, str(local.dtype),
                                           factor * nbytes, need.source, reason))

    # --- the walk -----------------------------------------------------------------------
    def run(self, in_dims: list[Dims], out_dims: list[Dims]) -> SpmdProgram:
        inputs = []
        for var, dims in zip(self.graph.inputs, in_dims):
            local = Var(var.aval.update(shape=local_shape(var.aval.shape, dims, self.mesh)))
            inputs.append(local)
            self.env[var] = _Local(local, dims)
        for var in self.graph.constvars:
            self.env[var] = _Local(var, whole(var.aval.ndim))
        for self.now, eqn in enumerate(self.graph.eqns):
            self.equation(eqn)
        self.now = len(self.graph.eqns)
        outputs = []
        for k, (atom, dims) in enumerate(zip(self.graph.outputs, out_dims)):
            need = _Need(f"output {k}", self._source_of(atom))
            outputs.append(self.convert(atom, dims, need).atom)
        graph = Graph(inputs, outputs, self.eqns, list(self.graph.constvars),
                      list(self.graph.constvals))
        return SpmdProgram(graph, in_dims, out_dims, self.collectives, self.mesh)

    def _source_of(self, atom: Atom) -> SourceInfo | None:
        eqn = self.producer.get(atom) if isinstance(atom, Var) else None
        return eqn.source if eqn is not None else None

    def state(self, atom: Atom) -> _Local:
        if isinstance(atom, Literal):
            return _Local(atom, whole(atom.aval.ndim))
        return self.env[atom]

    def equation(self, eqn: Eqn) -> None:
        states = [self.state(a) for a in eqn.inputs]
        decision = decide(eqn, [s.dims for s in states],
                          [self.specs[v] for v in eqn.outputs], self.mesh)
        if decision is None:  # no rule: whole operands, whole results
            decision = ShardingDecision([whole(a.aval.ndim) for a in eqn.inputs],
                                        [whole(v.aval.ndim) for v in eqn.outputs])
        wants = [_full(d) for d in decision.inputs]
        outs_dims = [_full(d) for d in decision.outputs]
        partial = self._passes_partial(eqn, states, wants, outs_dims, decision)
        if partial is not None:
            inputs = [s.atom for s in states]
        else:
            partial = decision.partial
            inputs = [self.convert(atom, want, _Need(
                f"operand {k} of {eqn.prim.name}", eqn.source,
                tuple(w if j != k else () for j, w in enumerate(wants)))).atom
                for k, (atom, want) in enumerate(zip(eqn.inputs, wants))]
        params = decision.params if decision.params is not None else eqn.params
        outs = self.emit(eqn.prim, inputs, params, eqn.source)
        for var, out, dims in zip(eqn.outputs, outs, outs_dims):
            expected = local_shape(var.aval.shape, dims, self.mesh)
            if out.aval.shape != expected:
                raise EmberValueError(
                    f"partitioner: the sharding rule of {eqn.prim.name} gave a shard of "
                    f"shape {out.aval.shape}, expected {expected} for {describe(dims)} of "
                    f"{var.aval.shape}; this is a bug in the rule")
            self.env[var] = _Local(out, dims, tuple(partial), decision.reduce)
            self.producer[var] = eqn

    def _passes_partial(self, eqn: Eqn, states: list[_Local], wants: list[Dims],
                        outs_dims: list[Dims], decision: ShardingDecision):
        """The partial axes of the results, if the equation is linear in its partial
        operands and may run on them as they are; else None."""
        kind = _LINEAR.get(eqn.prim.name)
        partial = [s for s in states if s.partial]
        if kind is None or not partial:
            return None
        axes = partial[0].partial
        if any(s.partial != axes or s.reduce != "sum" for s in partial):
            return None
        if kind == "all" and len(partial) != len(states):
            return None
        if kind == "one" and len(partial) != 1:
            return None
        if kind == "first" and (not states[0].partial or len(partial) != 1):
            return None
        if eqn.prim.name == "convert_element_type" and not (
                dtypes.is_inexact(eqn.inputs[0].aval.dtype)
                and dtypes.is_inexact(eqn.outputs[0].aval.dtype)):
            return None
        if any(s.dims != w for s, w in zip(states, wants)):
            return None
        split = {a for dims in (*wants, *outs_dims) for d in dims for a in d}
        if split & set(axes) or (decision.partial and decision.reduce != "sum"):
            return None
        return tuple(axes) + tuple(a for a in decision.partial if a not in axes)

    # --- converting a value's split -----------------------------------------------------
    def convert(self, atom: Atom, want: Dims, need: _Need) -> _Local:
        state = self.state(atom)
        if state.partial:
            state = self.combine(atom, want, need)
        if state.dims == want:
            return state
        if isinstance(atom, Var) and (atom, want) in self.converted:
            return self.converted[(atom, want)]
        x, have = state.atom, [tuple(d) for d in state.dims]
        for d in range(len(have)):
            keep = _common_prefix(have[d], want[d])
            while len(have[d]) > keep:
                axis = have[d][-1]
                target = _moves_to(axis, have, want, d)
                before = describe(tuple(have))
                if target is not None:
                    x = self.emit1(all_to_all_p, [x], dict(
                        axis_name=axis, split_axis=target, concat_axis=d, tiled=True,
                        axis_size=self.mesh[axis]), need.source)
                    have[target] = have[target] + (axis,)
                    self.record("all-to-all", axis, x.aval, need,
                                f"{need.what} is {before}, needed as {describe(want)}: "
                                f"mesh axis {axis!r} moves from dimension {d} to {target}")
                else:
                    x = self.emit1(all_gather_p, [x], dict(
                        axis_name=axis, axis=d, tiled=True, axis_size=self.mesh[axis]),
                        need.source)
                    self.record("all-gather", axis, x.aval, need,
                                f"{need.what} is {before}, needed as {describe(want)}: "
                                f"dimension {d} must not be split over {axis!r}"
                                f"{need.clash(axis)}")
                have[d] = have[d][:-1]
        for d in range(len(have)):
            while have[d] != want[d]:
                axis = want[d][len(have[d])]
                x = self.local_slice(x, d, axis, need.source)
                have[d] = have[d] + (axis,)
        converted = _Local(x, tuple(have))
        if isinstance(atom, Var):  # later consumers wanting the same split reuse it
            self.converted[(atom, want)] = converted
        return converted

    def local_slice(self, x: Atom, dim: int, axis: str, source: SourceInfo | None) -> Var:
        """This shard's block of ``x`` along ``dim`` for mesh ``axis``: no communication."""
        block = x.aval.shape[dim] // self.mesh[axis]
        int32 = ShapedArray((), dtypes.int32)
        index = self.emit1(axis_index_p, [], dict(axis_name=axis), source)
        start = self.emit1(ELEMENTWISE["mul"], [index, Literal(block, int32)], {}, source)
        starts = [start if k == dim else Literal(0, int32) for k in range(x.aval.ndim)]
        sizes = tuple(block if k == dim else s for k, s in enumerate(x.aval.shape))
        return self.emit1(dynamic_slice_p, [x, *starts], dict(slice_sizes=sizes), source)

    def combine(self, atom: Var, want: Dims, need: _Need) -> _Local:
        """Make ``atom`` whole over its partial axes: reduce-scatter into the split
        ``want`` asks for where it can, else all-reduce (summing every live value that is
        partial over the same axes in the same collective)."""
        state = self.env[atom]
        x, dims, axes = state.atom, list(state.dims), list(state.partial)
        origin = self._source_of(atom)
        where = f" (from {origin.short()})" if origin else ""
        if state.reduce == "sum":
            for axis in list(axes):
                d = _scatter_dim(axis, dims, want, x.aval.shape, self.mesh)
                if d is None:
                    continue
                x = self.emit1(psum_scatter_p, [x], dict(
                    axis_name=axis, scatter_dimension=d, tiled=True,
                    axis_size=self.mesh[axis]), need.source)
                self.record("reduce-scatter", axis, state.atom.aval, need,
                            f"partial sums over {axis!r}{where}; {need.what} wants "
                            f"dimension {d} split over {axis!r}")
                dims[d] = dims[d] + (axis,)
                axes.remove(axis)
        self.env[atom] = _Local(x, tuple(dims), tuple(axes), state.reduce)
        if axes:
            self.all_reduce(atom, tuple(axes), need, where)
        return self.env[atom]

    def all_reduce(self, atom: Var, axes: tuple[str, ...], need: _Need, where: str) -> None:
        state = self.env[atom]
        if state.reduce != "sum":
            prim = pmax_p if state.reduce == "max" else pmin_p
            x = state.atom
            for axis in axes:
                x = self.emit1(prim, [x], dict(axis_name=axis), need.source)
                self.record("all-reduce", axis, x.aval, need,
                            f"partial {state.reduce}s over {axis!r}{where}; {need.what} "
                            "needs the whole value")
            self.env[atom] = _Local(x, state.dims)
            return
        group = [atom] + [v for v, s in self.env.items()
                          if v is not atom and s.partial == axes and s.reduce == "sum"
                          and s.atom.aval.dtype == state.atom.aval.dtype
                          and self._alive_later(v)]
        flat = [self.env[v].atom for v in group]
        if len(group) > 1:
            pieces = [self.emit1(reshape_p, [x], dict(new_sizes=(x.aval.size,)), need.source)
                      for x in flat]
            joined = self.emit1(concatenate_p, pieces, dict(dimension=0), need.source)
        else:
            joined = flat[0]
        for axis in axes:
            before = joined
            joined = self.emit1(psum_p, [joined], dict(axis_name=axis), need.source)
            what = (f"{len(group)} partial sums over {axis!r} summed together"
                    if len(group) > 1 else f"partial sums over {axis!r}{where}")
            self.record("all-reduce", axis, before.aval, need,
                        f"{what}; {need.what} needs the whole value", values=len(group))
        offset = 0
        for var, x in zip(group, flat):
            if len(group) > 1:
                size = x.aval.size
                piece = self.emit1(slice_p, [joined], dict(
                    start_indices=(offset,), limit_indices=(offset + size,), strides=(1,)),
                    need.source)
                x = self.emit1(reshape_p, [piece], dict(new_sizes=x.aval.shape), need.source)
                offset += size
            else:
                x = joined
            self.env[var] = _Local(x, self.env[var].dims)

    def _alive_later(self, var: Var) -> bool:
        return self.last_use.get(var, -1) >= self.now


def rewrite(graph: Graph, mesh: Mapping[str, int], specs: Mapping[Var, Dims],
            in_dims: list[Dims], out_dims: list[Dims]) -> SpmdProgram:
    """The per-device program of ``graph`` whose values are split as ``specs`` say."""
    return _Rewriter(graph, mesh, specs).run(in_dims, out_dims)


def _full(dims: Dims) -> Dims:
    return tuple(() if axes is None else tuple(axes) for axes in dims)


def _common_prefix(a: tuple, b: tuple) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def _moves_to(axis: str, have: list[tuple], want: Dims, source_dim: int) -> int | None:
    """The dimension ``axis`` should split next (its split so far a prefix of the
    wanted one), other than ``source_dim``: there an all-to-all moves it."""
    for e, wanted in enumerate(want):
        if e != source_dim and len(wanted) > len(have[e]) and \
                wanted[:len(have[e])] == have[e] and wanted[len(have[e])] == axis:
            return e
    return None


def _scatter_dim(axis: str, dims: list[tuple], want: Dims, shape: tuple[int, ...],
                 mesh: Mapping[str, int]) -> int | None:
    for d, wanted in enumerate(want):
        if len(wanted) > len(dims[d]) and wanted[:len(dims[d])] == dims[d] and \
                wanted[len(dims[d])] == axis and shape[d] % mesh[axis] == 0:
            return d
    return None


def _last_uses(graph: Graph) -> dict[Var, int]:
    last: dict[Var, int] = {}
    for k, eqn in enumerate(graph.eqns):
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                last[atom] = k
    for atom in graph.outputs:
        if isinstance(atom, Var):
            last[atom] = math.inf
    return last
