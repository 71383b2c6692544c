"""``jit`` with shardings: from a traced global Graph and the user's annotations to the
global program the backend compiles (the per-device program under ``shard_map``)."""
from __future__ import annotations

import contextlib
import re
import sys
import time
from typing import Any, Callable, Iterator, Sequence

from ember.config import config

from ember.core.pytree import PyTreeDef, broadcast_prefix, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.errors import EmberValueError
from ember.ir.dump import Dump
from ember.ir.graph import Graph
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops.sharding_constraint import sharding_constraint_p
from ember.sharding.mesh import Mesh, get_mesh
from ember.sharding.partition_spec import PartitionSpec
from ember.sharding.partitioner import SpmdProgram, partition
from ember.sharding.placement import as_sharding
from ember.sharding.shardings import NamedSharding, Sharding

__all__ = ["PartitionedJit", "constrained_call", "partition_jit", "trace_sharded",
           "wants_partitioning"]


def _is_annotation(x: Any) -> bool:
    return x is None or isinstance(x, (Sharding, PartitionSpec))


def wants_partitioning(graph: Graph, arg_shardings: Sequence[Any], in_shardings: Any,
                       out_shardings: Any) -> bool:
    return (in_shardings is not None or out_shardings is not None
            or any(isinstance(s, NamedSharding) for s in arg_shardings)
            or any(eqn.prim is sharding_constraint_p for eqn in graph.eqns))


def spans_processes(mesh: Mesh) -> bool:
    """Whether ``mesh`` holds devices of several processes (``ember.distributed``)."""
    return len({device.process_index for device in mesh.devices.flat}) > 1


class PartitionedJit:
    """What ``Compiled`` keeps of a partitioned program. Across processes (``view``:
    this process's view of the mesh) the program takes and returns this process's
    blocks: ``arguments`` cuts whole values to their blocks, ``results`` makes the
    blocks global arrays."""

    def __init__(self, program: SpmdProgram, mesh: Mesh, view: Any = None) -> None:
        self.program = program
        self.mesh = mesh
        self.view = view
        self.out_shardings = [NamedSharding(mesh, spec) for spec in program.out_specs]

    def arguments(self, leaves: list[Any]) -> list[Any]:
        if self.view is None:
            return leaves
        return [self.view.block_of(leaf, spec)
                for leaf, spec in zip(leaves, self.program.in_specs)]

    def results(self, arrays: list[Any]) -> list[Any]:
        if self.view is not None:
            return [self.view.place(array, spec)
                    for array, spec in zip(arrays, self.program.out_specs)]
        for array, sharding in zip(arrays, self.out_shardings):
            # (their global buffers stay on the device that holds the mesh's arrays)
            array.committed = True
            array._sharding = sharding
        return arrays


def partition_jit(graph: Graph, in_tree: PyTreeDef, out_tree: PyTreeDef,
                  arg_shardings: Sequence[Any], in_shardings: Any, out_shardings: Any,
                  name: str) -> tuple[Graph, PartitionedJit] | None:
    """The global SPMD program of ``graph`` (the traced ``jit`` of ``name``), or None
    when nothing names a mesh. Over a mesh that spans processes, each process runs its
    block of the per-device program (the program returned takes and returns blocks)."""
    ins = _per_input(in_tree, in_shardings, name)
    outs = _per_output(out_tree, out_shardings, name)
    mesh = _the_mesh(graph, [*ins, *outs, *arg_shardings], name)
    if mesh is None:
        return None
    view = process_view(mesh) if spans_processes(mesh) else None
    in_dims = []
    for k, (var, given, own) in enumerate(zip(graph.inputs, ins, arg_shardings)):
        what = f"jit of {name}: argument leaf {k}"
        if given is not None and isinstance(own, NamedSharding) \
                and as_sharding(given, what) != own:
            raise EmberValueError(
                f"{what} carries {own}, which differs from its in_shardings "
                f"{as_sharding(given, what)} (as in JAX, this is an error); move it first "
                "with ember.reshard(x, sharding), or leave its in_shardings entry None")
        chosen = given if given is not None else own if isinstance(own, NamedSharding) \
            else None
        in_dims.append(None if chosen is None else _dims(chosen, var.aval.shape, what))
    out_dims = [None if s is None else _dims(s, atom.aval.shape, f"jit of {name}: output {k}")
                for k, (atom, s) in enumerate(zip(graph.outputs, outs))]
    start = time.perf_counter()
    program = partition(graph, mesh, in_dims, out_dims)
    global_graph = _global_program(program, mesh, graph, view, name)
    if config.log_enabled("compile"):
        print(f"ember: partitioned {name} over {mesh} in {time.perf_counter() - start:.4f} s "
              f"({len(program.collectives)} collectives)", file=sys.stderr)
    dump = Dump.open(graph, "partition", re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or None)
    if dump is not None:  # EMBER_DUMP: the partitioner's stage, as the compiler's are
        dump.write("input.txt", graph.pretty_print())
        dump.write("spmd.txt", program.as_text())
        dump.write("global_program.txt", global_graph.pretty_print())
    return global_graph, PartitionedJit(program, mesh, view)


# --- across processes -----------------------------------------------------------------

def process_view(mesh: Mesh) -> Any:
    from ember.sharding import shard_map

    view = shard_map.process_view(mesh)
    if view is None:
        raise EmberValueError(f"the mesh {mesh.shape} holds devices of other processes, "
                              "but ember.distributed is not initialized in this one")
    return view


@contextlib.contextmanager
def _process_views(wrap: Callable[[Any], Callable[[Mesh], Any]]) -> Iterator[None]:
    """shard_map's hook for meshes across processes, replaced by ``wrap(hook)`` for a
    trace."""
    from ember.sharding import shard_map

    hook = shard_map.process_view
    shard_map.process_view = wrap(hook)
    try:
        yield
    finally:
        shard_map.process_view = hook


def trace_sharded(retrace: Callable[[list[Any]], Graph], avals: Sequence[Any],
                  arg_shardings: Sequence[Any], annotated: bool) -> tuple[Graph, bool]:
    """The trace of a jit whose arguments or annotations are sharded, and whether to
    partition it.

    Arguments that span processes come in as this process's blocks. A function with no
    shardings of its own that maps over a mesh across processes with ``shard_map``
    runs on the blocks, as ``shard_map`` does outside jit (other arguments are blocks
    too): traced so, and not partitioned. Any other is traced at global shapes, with a
    shard_map inside traced as in one process: a global program, for the partitioner.
    """
    spanning = [isinstance(s, NamedSharding) and spans_processes(s.mesh)
                for s in arg_shardings]
    if not any(spanning):
        with _process_views(lambda hook: lambda mesh: None):
            return retrace(avals), True
    if not annotated:
        seen: list[Mesh] = []

        def recording(hook):
            def view(mesh: Mesh) -> Any:
                found = hook(mesh)
                if found is not None:
                    seen.append(mesh)
                return found
            return view

        try:
            with _process_views(recording):
                graph = retrace(avals)
        except Exception:
            if seen:
                raise
        else:
            if seen:
                return graph, False
        # (no shard_map: the blocks were the wrong reading, whatever that trace did)
    scaled = [aval.update(shape=process_view(own.mesh).global_shape(aval.shape, own.spec))
              if span else aval for aval, own, span in zip(avals, arg_shardings, spanning)]
    with _process_views(lambda hook: lambda mesh: None):
        return retrace(scaled), True


def _global_program(program: SpmdProgram, mesh: Mesh, graph: Graph, view: Any,
                    name: str) -> Graph:
    """The per-device program mapped over the mesh by ``shard_map``, traced once into
    a Graph over global arrays; across processes, over this process's blocks (the
    collectives over axes that cross processes go through ``ember.distributed``)."""
    from ember.sharding.shard_map import shard_map

    def per_device(*shards: Any) -> list[Any]:
        return eval_graph(program.graph, list(shards), bind_equation)

    # check_vma=False: the partitioner made each output the same on every shard of the
    # mesh axes its spec leaves out; nothing is differentiated past this point.
    mapped = shard_map(per_device, mesh=mesh, in_specs=tuple(program.in_specs),
                       out_specs=list(program.out_specs), check_vma=False)
    avals = graph.in_avals
    if view is not None:
        avals = [a.update(shape=_block_shape(view, a.shape, spec, f"argument leaf {k}", name))
                 for k, (a, spec) in enumerate(zip(avals, program.in_specs))]
        for k, (a, spec) in enumerate(zip(graph.out_avals, program.out_specs)):
            _block_shape(view, a.shape, spec, f"output {k}", name)
    return trace_to_graph(lambda *xs: list(mapped(*xs)), avals)


def _block_shape(view: Any, shape: tuple[int, ...], spec: PartitionSpec, what: str,
                 name: str) -> tuple[int, ...]:
    try:
        return view.block_shape(shape, spec)
    except EmberValueError as error:
        raise EmberValueError(
            f"jit of {name}: {what}, split as {spec} over a mesh across processes, is "
            f"not supported: {error} (split that dimension over one mesh axis, or "
            "order the mesh's devices so that each process's shards of it are "
            "contiguous)") from None


def constrained_call(call: Callable[..., Any], args: tuple, in_shardings: Any,
                     out_shardings: Any) -> Any:
    """``call(*args)`` inlined into an enclosing trace (a jit inside a jit, under grad):
    as in JAX, its in/out shardings constrain its arguments and results."""
    from ember.lax.sharding import with_sharding_constraint

    if in_shardings is not None:
        args = with_sharding_constraint(args, tuple(in_shardings)
                                        if isinstance(in_shardings, list) else in_shardings)
    out = call(*args)
    return out if out_shardings is None else with_sharding_constraint(out, out_shardings)


def _per_input(in_tree: PyTreeDef, in_shardings: Any, name: str) -> list[Any]:
    """One annotation per flat input: ``in_shardings`` covers the positional
    arguments (a pytree prefix of them); keyword arguments are unspecified."""
    args, kwargs = tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
    n_kwargs = in_tree.children[1].num_leaves
    if in_shardings is None:
        return [None] * in_tree.num_leaves
    if _is_annotation(in_shardings):
        return [in_shardings] * (in_tree.num_leaves - n_kwargs) + [None] * n_kwargs
    try:
        per_arg = broadcast_prefix(tuple(in_shardings) if isinstance(in_shardings, list)
                                   else in_shardings, args, is_leaf=_is_annotation)
    except ValueError:
        raise EmberValueError(f"jit of {name}: in_shardings {in_shardings!r} must be a "
                              f"pytree prefix of the positional arguments, structured as "
                              f"{in_tree.children[0]}") from None
    return per_arg + [None] * n_kwargs


def _per_output(out_tree: PyTreeDef, out_shardings: Any, name: str) -> list[Any]:
    if out_shardings is None:
        return [None] * out_tree.num_leaves
    outs = tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    try:
        return broadcast_prefix(out_shardings, outs, is_leaf=_is_annotation)
    except ValueError:
        raise EmberValueError(f"jit of {name}: out_shardings {out_shardings!r} must be a "
                              f"pytree prefix of the outputs, structured as "
                              f"{out_tree}") from None


def _the_mesh(graph: Graph, annotations: Sequence[Any], name: str) -> Mesh | None:
    meshes = [a.mesh for a in annotations if isinstance(a, NamedSharding)]
    meshes += [e.params["sharding"].mesh for e in graph.eqns if e.prim is sharding_constraint_p]
    if not meshes and any(isinstance(a, PartitionSpec) for a in annotations):
        meshes = [as_sharding(PartitionSpec(), f"jit of {name}").mesh]
    if not meshes:
        current = get_mesh()
        return current
    for other in meshes[1:]:
        if other != meshes[0]:
            raise EmberValueError(f"jit of {name}: shardings over two meshes, {meshes[0]} "
                                  f"and {other}; put every argument and annotation on one "
                                  "mesh (ember.reshard)")
    return meshes[0]


def _dims(annotation: Any, shape: tuple[int, ...], what: str):
    sharding = as_sharding(annotation, what)
    if not isinstance(sharding, NamedSharding):
        raise EmberValueError(f"{what}: jit partitions over NamedShardings, got "
                              f"{type(sharding).__name__}")
    try:
        sharding.shard_shape(shape)
    except EmberValueError as error:
        raise EmberValueError(f"{what}: {error}") from None
    return tuple(sharding.spec.axes_of(d) for d in range(len(shape)))
