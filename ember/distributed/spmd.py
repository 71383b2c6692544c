"""One program, many processes: ``shard_map`` over a mesh whose devices belong to
several processes.

Each process runs the shard_map over its own block of the mesh (the existing batched
execution over its local devices); arguments and results are this process's blocks of
the global arrays. A collective over a mesh axis that crosses processes is hierarchical:
the shards of this process are stacked (the shared-memory path), then one host-step
primitive (``process_collectives``) combines them with the other processes' through
MPI, in the global order of the shards, so results do not depend on how the mesh is
split among processes.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ember.errors import EmberValueError
from ember.sharding.mesh import Mesh

__all__ = ["ProcessSpan", "ProcessView", "install", "process_blocks", "uninstall"]


@dataclass(frozen=True)
class ProcessSpan:
    """A mesh axis that crosses processes, seen from this process: ``size`` shards in
    all, ``local`` of them here starting at ``offset``; ``ranks``: the processes along
    the axis (those sharing this process's place on the other axes), in axis order."""

    axis: Any
    size: int
    local: int
    offset: int
    ranks: tuple[int, ...]
    program: str = ""  # the shard_map it belongs to, for the processes' signature check

    def _site(self, collective: str) -> str:
        return f"{collective} over mesh axis {self.axis!r} in {self.program}"

    # Each method is the named batch rule of a collective (ember.ops.collectives) for
    # this axis: ``x`` holds the local shards along ``dim`` (None: the same on all).
    def reduce(self, kind: str, x: Any, dim: int | None) -> Any:
        from ember.distributed.process_collectives import process_extremum_p, process_sum_p
        from ember.ops.rules import move_batch_axis

        if dim is None:  # the same on every shard
            return x * self.size if kind == "sum" else x
        stacked = move_batch_axis(x, dim, 0, self.local)
        site = self._site({"sum": "psum"}.get(kind, f"p{kind}"))
        if kind == "sum":
            return process_sum_p.bind(stacked, ranks=self.ranks, site=site)
        return process_extremum_p.bind(stacked, op=kind, ranks=self.ranks, site=site)

    def gather(self, x: Any, dim: int | None) -> Any:
        """Every shard of the axis, stacked in front in global order."""
        from ember.distributed.process_collectives import process_gather_p
        from ember.ops.rules import move_batch_axis

        stacked = move_batch_axis(x, dim, 0, self.local)
        return process_gather_p.bind(stacked, ranks=self.ranks, offset=self.offset,
                                     site=self._site("all_gather"))

    def exchange(self, x: Any) -> Any:
        """``x``: [every destination shard, this process's source shards, ...]; the
        result: [this process's destination shards, every source shard, ...]."""
        from ember.distributed.process_collectives import process_all_to_all_p

        return process_all_to_all_p.bind(x, ranks=self.ranks, site=self._site("all_to_all"))

    def mine(self, x: Any, axis: int) -> Any:
        """This process's shards of ``x``, whose axis ``axis`` runs over all shards."""
        from ember.ops.structural import slice_in_dim

        return slice_in_dim(x, self.offset, self.offset + self.local, axis=axis)

    def sources(self, source: np.ndarray) -> np.ndarray:
        """The entries of ``source`` (one per shard of the axis) of this process's shards."""
        return source[self.offset:self.offset + self.local]

    def axis_index(self) -> Any:
        from ember.ops.structural import iota

        return iota(np.int32, self.local) + np.int32(self.offset)


# --- the blocks of a mesh that belong to each process -----------------------------------

def process_blocks(mesh: Mesh) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """Each process's block of ``mesh`` as (start, stop) per axis; None when the mesh
    lies in one process. Each process's devices must form a block, all of one shape."""
    owners = np.vectorize(lambda d: d.process_index, otypes=[int])(mesh.devices)
    found = {}
    for process in np.unique(owners):
        where = np.argwhere(owners == process)
        start, stop = where.min(axis=0), where.max(axis=0) + 1
        if int(np.prod(stop - start)) != len(where):
            raise EmberValueError(
                f"the devices of process {process} do not form a block of the mesh "
                f"{mesh.shape}; order the mesh's devices so that each process's are "
                "contiguous (ember.devices() lists them process by process)")
        found[int(process)] = (tuple(map(int, start)), tuple(map(int, stop)))
    shapes = {tuple(b - a for a, b in zip(*block)) for block in found.values()}
    if len(shapes) != 1:
        raise EmberValueError(f"processes hold blocks of different shapes {sorted(shapes)} "
                              f"of the mesh {mesh.shape}; give each the same")
    return None if len(found) == 1 else found


class ProcessView:
    """A mesh that spans processes, from this process: its block (``local_mesh``) and
    the axes that cross processes (``spans``)."""

    def __init__(self, mesh: Mesh, blocks: dict) -> None:
        from ember.distributed.state import current

        me = current("a mesh across processes").process_id
        if me not in blocks:
            raise EmberValueError(f"process {me} has no device in the mesh {mesh.shape}; "
                                  "every process must take part in a mesh across processes")
        start, stop = blocks[me]
        self.mesh = mesh
        self.start = start
        self.local_mesh = Mesh(mesh.devices[tuple(slice(a, b) for a, b in zip(start, stop))],
                               mesh.axis_names, mesh.axis_types)
        self.spans: dict[Any, ProcessSpan] = {}
        for i, (axis, size) in enumerate(zip(mesh.axis_names, mesh.axis_sizes)):
            local = stop[i] - start[i]
            if local == size:
                continue  # inside each process: the shared-memory path alone
            along = sorted((b[0][i], p) for p, b in blocks.items()
                           if all(b[0][j] == start[j] for j in range(len(start)) if j != i))
            self.spans[axis] = ProcessSpan(axis, size, local, start[i],
                                           tuple(p for _, p in along))

    def local_argument(self, value: Any) -> Any:
        """A global array enters as this process's block (anything else is taken to be
        that block already: a tracer inside ``jit``, or the process's own data)."""
        from ember.distributed.global_array import GlobalArray

        return value.local_data if isinstance(value, GlobalArray) else value

    def place(self, value: Any, spec: Any) -> Any:
        """A result: this process's block of the global array ``spec`` describes."""
        from ember.distributed.global_array import GlobalArray
        from ember.runtime.array import Array
        from ember.sharding.shardings import NamedSharding

        if not isinstance(value, Array):
            return value  # traced inside jit: the block
        return GlobalArray(value, NamedSharding(self.mesh, spec),
                           self.global_shape(value.shape, spec))

    def _scale(self, ndim: int, spec: Any) -> list[int]:
        """Per dimension, how many processes' blocks make the whole under ``spec``."""
        scale = [1] * ndim
        for dim in range(ndim):
            for axis in spec.axes_of(dim):
                if axis in self.spans:
                    scale[dim] *= self.spans[axis].size // self.spans[axis].local
        return scale

    def global_shape(self, block: tuple[int, ...], spec: Any) -> tuple[int, ...]:
        """The shape of the global array whose block here has shape ``block``."""
        return tuple(n * s for n, s in zip(block, self._scale(len(block), spec)))

    def block_shape(self, shape: tuple[int, ...], spec: Any) -> tuple[int, ...]:
        """The shape of this process's block of a global array of ``shape`` (an error
        where this process's shards do not form one block)."""
        from ember.distributed.global_array import process_region
        from ember.sharding.shardings import NamedSharding

        region = process_region(NamedSharding(self.mesh, spec), shape)
        return tuple(s.stop - s.start for s in region)

    def block_of(self, value: Any, spec: Any) -> Any:
        """This process's block of ``value``, a whole array (the same on every process)
        split as ``spec`` says; a global array is its block already."""
        from ember.distributed.global_array import GlobalArray, process_region
        from ember.sharding.shardings import NamedSharding

        if isinstance(value, GlobalArray):
            return value.local_data
        shape = tuple(np.shape(value))
        region = process_region(NamedSharding(self.mesh, spec), shape)
        if all(s.stop - s.start == n for s, n in zip(region, shape)):
            return value
        return np.asarray(value)[region]

    @contextlib.contextmanager
    def active(self, name: str, leaves: list) -> Iterator[None]:
        """Collectives of the shard_map of ``name`` on ``leaves`` (this process's blocks)
        go across processes while the body is traced."""
        from dataclasses import replace

        from ember.core import dtypes
        from ember.core.abstract import aval_of

        avals = ", ".join(f"{dtypes.short_name(a.dtype)}[{','.join(map(str, a.shape))}]"
                          for a in map(aval_of, leaves))
        program = f"shard_map of {name}({avals})"
        _ACTIVE.append({axis: replace(span, program=program)
                        for axis, span in self.spans.items()})
        try:
            yield
        finally:
            _ACTIVE.pop()


_ACTIVE: list[dict[Any, ProcessSpan]] = []


def span_of(axis_name: Any) -> ProcessSpan | None:
    """The process span of a mesh axis of the innermost shard_map that has it."""
    for spans in reversed(_ACTIVE):
        if axis_name in spans:
            return spans[axis_name]
    return None


def view_of(mesh: Mesh) -> ProcessView | None:
    blocks = process_blocks(mesh)
    return None if blocks is None else ProcessView(mesh, blocks)


def install() -> None:
    """Hand shard_map and the collectives their hooks (ember.distributed.initialize)."""
    from ember.ops import collectives
    from ember.sharding import shard_map

    shard_map.process_view = view_of
    collectives.process_span = span_of


def uninstall() -> None:
    from ember.ops import collectives
    from ember.sharding import shard_map

    shard_map.process_view = lambda mesh: None
    collectives.process_span = lambda axis_name: None

