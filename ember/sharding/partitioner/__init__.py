"""The SPMD partitioner: a global program, split over a mesh, rewritten as one
per-device program with explicit collectives (global-view SPMD, as GSPMD does for JAX).

Stages, each a module:

1. ``propagation``: every value gets a split, propagated forward and backward through
   each primitive's sharding rule (``Primitive.def_sharding``, defined with the
   primitive) to a fixed point.
2. ``rewrite``: each equation at shard shapes, with all-gather / all-to-all / local
   slices where an operand's split differs from the one it is computed with, and
   reduce-scatter / all-reduce where a partial result must be whole.
3. ``jit_program``: the per-device program run by ``shard_map`` over the mesh, traced
   into ONE global Graph that the backend compiles as any other (once, whatever the
   number of devices).

Priority, when splits conflict (highest first):

1. ``with_sharding_constraint``: the constrained value has exactly that split (also
   when it is a result with another ``out_shardings``: it is converted after).
2. ``jit(in_shardings=, out_shardings=)`` and an argument's own sharding
   (``device_put(x, NamedSharding(...))``): arguments and results have exactly these
   splits. (An argument whose own sharding differs from its ``in_shardings`` entry is
   an error, as in JAX.)
3. Propagation: forward sweeps (program order) before backward ones; within one
   equation's rule, operands before results and earlier operands before later ones;
   the first proposal that splits a dimension fixes it, and a mesh axis splits at most
   one dimension of a value. Whole (replicated) dimensions are never propagated: only
   splits are.
4. Whatever is still unknown is whole (replicated).

A value used with another split than its own is converted where it is used (the
collective is then attributed to that use's source line).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ember.config import config
from ember.errors import EmberValueError
from ember.ir.graph import Graph, Var
from ember.ir.verifier import verify
from ember.ops.sharding_constraint import constraint_dims, sharding_constraint_p
from ember.ops.sharding_rules import Dims
from ember.sharding.mesh import Mesh
from ember.sharding.partitioner.program import Collective, SpmdProgram
from ember.sharding.partitioner.propagation import propagate, whole
from ember.sharding.partitioner.rewrite import rewrite
from ember.transforms.calls import inline_calls

__all__ = ["Collective", "SpmdProgram", "partition"]


def partition(graph: Graph, mesh: Mesh, in_dims: Sequence[Dims | None],
              out_dims: Sequence[Dims | None]) -> SpmdProgram:
    """The per-device program of ``graph`` over ``mesh``. ``in_dims`` / ``out_dims``:
    the split of each input / output (one tuple of mesh axes per dimension), or None
    where the partitioner may choose."""
    # Calls (custom_jvp/vjp: softmax, gelu...) have no sharding rule of their own; their
    # bodies do. The program is final (nothing differentiates it after this), and the
    # compiler would inline them next: so inline them first, else each ran on whole,
    # all-gathered operands on every device.
    graph = inline_calls(graph)
    sizes: Mapping[str, int] = mesh.shape
    fixed: dict[Var, Dims] = {}
    for var in graph.constvars:
        fixed[var] = whole(var.aval.ndim)
    for eqn in graph.eqns:
        if eqn.prim is sharding_constraint_p:
            sharding = eqn.params["sharding"]
            if sharding.mesh != mesh:
                raise EmberValueError(
                    f"with_sharding_constraint at {eqn.source or 'an unknown line'} uses "
                    f"{sharding.mesh}, but the program is partitioned over {mesh}; use "
                    "one mesh for the whole program")
            fixed[eqn.outputs[0]] = constraint_dims(sharding, eqn.outputs[0].aval.ndim)
    for var, dims in zip(graph.inputs, in_dims):
        if dims is not None:
            fixed.setdefault(var, tuple(dims))
    for atom, dims in zip(graph.outputs, out_dims):
        if dims is not None and isinstance(atom, Var):
            fixed.setdefault(atom, tuple(dims))
    specs = propagate(graph, sizes, fixed)
    final_in = [tuple(d) if d is not None else specs[v] for v, d in zip(graph.inputs, in_dims)]
    final_out = [tuple(d) if d is not None else
                 (specs[a] if isinstance(a, Var) else whole(a.aval.ndim))
                 for a, d in zip(graph.outputs, out_dims)]
    program = rewrite(graph, sizes, specs, final_in, final_out)
    if config.verify:  # EMBER_VERIFY: the per-device program keeps the IR's invariants
        verify(program.graph)
    return program
