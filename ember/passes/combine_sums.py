"""Sums of sums as one sum.

Inside ``shard_map`` (one program over all shards: named vmaps) ``psum`` of a
per-shard sum is a sum over the shard axis of a sum over the shard's batch: two
reductions, two kernels, where the unsharded program has one. Here ``reduce_sum``
looks through the equations that make its operand, when it is their only reader:

- ``reduce_sum(reduce_sum(x, A), B)`` → one ``reduce_sum`` over both;
- a sum over batch axes of a ``dot_general`` → those axes contracted (a weight gradient
  summed over the shards is one contraction over shards and batch);
- through ``neg``, a product with a scalar splat (the sum of ``c * x`` is ``c`` times the
  sum of ``x``), a float quotient by one, ``transpose``, and a ``reshape`` that keeps
  the summed axes (leading ones, unchanged);
- over a ``concatenate`` along a kept axis whose every reader is a slice taking one
  piece (how the partitioner sends many partial sums through one all-reduce): each
  piece summed alone, and a slice of a ``concatenate`` that takes one piece → the piece;
- over size-1 axes only → a reshape.

Merged sums add in another order (as XLA's reduction merging does): results change by
float rounding, and stay bitwise reproducible, since the compiled order is fixed.

A program with effects is left as it is: across processes (``ember.distributed``, whose
collectives are effectful) every shard's partial sum is kept and the shards are summed
in their global order, so that how the shards are split among processes does not
change a bit; merging one process's local shards into its per-shard sums would.
"""
from __future__ import annotations

from typing import Any

from ember.core import dtypes
from ember.core.primitive import REGISTRY
from ember.ir.graph import Atom, Eqn, Graph, Var, has_effects, uses
from ember.passes.rewrite import in_subgraphs, new_eqn, substitute_inputs, substitute_outputs


def combine_sums(graph: Graph) -> Graph:
    """``graph`` with the sums of the module docstring merged (dead producers stay for
    DCE); ``graph`` itself if it has effects."""
    if any(has_effects(eqn) for eqn in graph.eqns):
        return graph
    return _Combiner(graph).run()


class _Combiner:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.reads = uses(graph)  # conservative after a rewrite: dead readers still count
        self.readers: dict[Var, list[Eqn]] = {}
        for eqn in graph.eqns:
            for atom in eqn.inputs:
                if isinstance(atom, Var):
                    self.readers.setdefault(atom, []).append(eqn)
        self.env: dict[Var, Atom] = {}
        self.eqns: list[Eqn] = []
        self.producer: dict[Var, Eqn] = {}
        self.source = None

    def run(self) -> Graph:
        for eqn in self.graph.eqns:
            eqn = in_subgraphs(substitute_inputs(eqn, self.env), combine_sums)
            self.source = eqn.source
            name = eqn.prim.name
            found = (self._reduce_sum(eqn) if name == "reduce_sum" else
                     self._slice(eqn) if name == "slice" else None)
            if found is None:
                self._append(eqn)
                continue
            (out,) = eqn.outputs
            self.env[out] = found
            if isinstance(found, Var):
                self.reads[found] = self.reads.get(found, 0) + self.reads.get(out, 0)
        return substitute_outputs(self.graph, self.eqns, self.env)

    def _append(self, eqn: Eqn) -> None:
        self.eqns.append(eqn)
        self.producer.update((var, eqn) for var in eqn.outputs)

    def _emit(self, name: str, inputs: list[Atom], **params: Any) -> Var:
        eqn = new_eqn(REGISTRY[name], inputs, params, self.source)
        for atom in inputs:
            if isinstance(atom, Var):
                self.reads[atom] = self.reads.get(atom, 0) + 1
        self._append(eqn)
        return eqn.outputs[0]

    def _only_reader(self, atom: Atom) -> Eqn | None:
        """The producer of ``atom`` when the equation being rewritten is its one reader."""
        if not isinstance(atom, Var) or self.reads.get(atom, 0) != 1:
            return None
        return self.producer.get(atom)

    # --- the rewrites ------------------------------------------------------------------
    def _reduce_sum(self, eqn: Eqn) -> Atom | None:
        x, axes = eqn.inputs[0], tuple(eqn.params["axes"])
        return self._of_pieces(eqn, x, axes) or self._through(x, axes)

    def _sum(self, x: Atom, axes: tuple[int, ...]) -> Atom:
        """``reduce_sum(x, axes)``, merged with what makes ``x`` where it can be."""
        if not axes:
            return x
        return self._through(x, axes) or self._emit("reduce_sum", [x], axes=axes)

    def _through(self, x: Atom, axes: tuple[int, ...]) -> Atom | None:
        """``reduce_sum(x, axes)`` computed inside the equation that makes ``x``, or
        None where no rewrite applies."""
        shape = x.aval.shape
        kept = [d for d in range(len(shape)) if d not in axes]
        out_shape = tuple(shape[d] for d in kept)
        p = self._only_reader(x)
        name = p.prim.name if p is not None else None
        if name == "reduce_sum":
            y = p.inputs[0]
            inner_kept = [d for d in range(y.aval.ndim) if d not in p.params["axes"]]
            return self._sum(y, tuple(sorted({*p.params["axes"],
                                               *(inner_kept[a] for a in axes)})))
        if name == "neg":
            return self._emit("neg", [self._sum(p.inputs[0], axes)])
        if name == "mul":
            for k, atom in enumerate(p.inputs):
                scalar = self._scalar(atom)
                if scalar is not None:
                    summed = self._sum(p.inputs[1 - k], axes)
                    splat = self._splat(scalar, out_shape)
                    return self._emit("mul", [summed, splat] if k else [splat, summed])
        if name == "div" and dtypes.is_inexact(x.aval.dtype):  # (integer division floors)
            scalar = self._scalar(p.inputs[1])
            if scalar is not None:
                return self._emit("div", [self._sum(p.inputs[0], axes),
                                          self._splat(scalar, out_shape)])
        if name == "transpose":
            permutation = tuple(p.params["permutation"])
            inner_axes = tuple(sorted(permutation[a] for a in axes))
            inner_kept = [d for d in range(len(shape)) if d not in inner_axes]
            order = tuple(inner_kept.index(permutation[d]) for d in kept)
            summed = self._sum(p.inputs[0], inner_axes)
            if order == tuple(range(len(order))):
                return summed
            return self._emit("transpose", [summed], permutation=order)
        if name == "reshape":
            y = p.inputs[0]
            common = next((k for k, (a, b) in enumerate(zip(y.aval.shape, shape)) if a != b),
                          min(y.aval.ndim, len(shape)))
            if max(axes) < common:
                summed = self._sum(y, axes)
                if summed.aval.shape == out_shape:
                    return summed
                return self._emit("reshape", [summed], new_sizes=out_shape)
        if name == "dot_general":
            (lc, rc), (lb, rb) = p.params["dimension_numbers"]
            if max(axes) < len(lb):
                dims = ((tuple(lb[a] for a in axes) + tuple(lc),
                         tuple(rb[a] for a in axes) + tuple(rc)),
                        (tuple(d for a, d in enumerate(lb) if a not in axes),
                         tuple(d for a, d in enumerate(rb) if a not in axes)))
                return self._emit("dot_general", list(p.inputs),
                                  **{**p.params, "dimension_numbers": dims})
        if all(shape[a] == 1 for a in axes):
            return self._emit("reshape", [x], new_sizes=out_shape)
        return None

    def _of_pieces(self, eqn: Eqn, x: Atom, axes: tuple[int, ...]) -> Atom | None:
        """The sum of a concatenate along a kept axis, as the concatenate of its
        pieces' sums, where only slices taking one piece each read the sum."""
        p = self._only_reader(x)
        if p is None or p.prim.name != "concatenate" or p.params["dimension"] in axes:
            return None
        dim = p.params["dimension"]
        out = eqn.outputs[0]
        kept_dim = dim - sum(1 for a in axes if a < dim)
        sizes = [piece.aval.shape[dim] for piece in p.inputs]
        readers = self.readers.get(out, [])
        if not readers or len(readers) != self.reads.get(out, 0) or any(
                self._piece(r, sizes, kept_dim, out.aval.shape) is None for r in readers):
            return None
        return self._emit("concatenate", [self._sum(piece, axes) for piece in p.inputs],
                          dimension=kept_dim)

    def _slice(self, eqn: Eqn) -> Atom | None:
        """A slice of a concatenate that takes one piece: that piece."""
        x = eqn.inputs[0]
        p = self.producer.get(x) if isinstance(x, Var) else None
        if p is None or p.prim.name != "concatenate":
            return None
        dim = p.params["dimension"]
        k = self._piece(eqn, [piece.aval.shape[dim] for piece in p.inputs], dim, x.aval.shape)
        return None if k is None else p.inputs[k]

    @staticmethod
    def _piece(eqn: Eqn, sizes: list[int], dim: int, shape: tuple[int, ...]) -> int | None:
        """Which piece (of ``sizes`` along ``dim``, concatenated into ``shape``) the
        slice ``eqn`` takes whole, or None."""
        if eqn.prim.name != "slice" or any(s != 1 for s in eqn.params["strides"] or ()):
            return None
        starts, limits = eqn.params["start_indices"], eqn.params["limit_indices"]
        if any((starts[d], limits[d]) != (0, shape[d]) for d in range(len(shape)) if d != dim):
            return None
        offsets = [sum(sizes[:k]) for k in range(len(sizes))]
        found = [k for k, (o, n) in enumerate(zip(offsets, sizes))
                 if (starts[dim], limits[dim]) == (o, o + n)]
        return found[0] if found else None

    # --- scalar operands ---------------------------------------------------------------
    def _scalar(self, atom: Atom) -> Atom | None:
        """The rank-0 value ``atom`` is a splat of (or ``atom`` itself if rank 0)."""
        if atom.aval.ndim == 0:
            return atom
        p = self.producer.get(atom) if isinstance(atom, Var) else None
        if p is not None and p.prim.name == "broadcast_in_dim" and p.inputs[0].aval.ndim == 0:
            return p.inputs[0]
        return None

    def _splat(self, scalar: Atom, shape: tuple[int, ...]) -> Atom:
        if not shape:
            return scalar
        return self._emit("broadcast_in_dim", [scalar], shape=shape, broadcast_dimensions=())
