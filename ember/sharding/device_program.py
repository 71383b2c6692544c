"""The per-device program of a per_device shard_map, compiled once for all devices.

The body is traced at per-device shapes, as shard_map's body over a mesh of one
device, with the device's position in the mesh as a runtime input (``coords``). Every
collective over a mesh axis then becomes a host step between the program's native
segments (the primitives of ``ember.distributed.process_collectives``, as for a mesh
across processes), which each device thread runs through shared memory
(``device_communicator``). What depends on the device (``axis_index``, the shard
``psum_scatter`` keeps, the source ``ppermute`` reads) reads ``coords``, so one compile
serves every device.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember.config import config
from ember.core.abstract import ShapedArray
from ember.core.pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.sharding.mesh import Mesh
from ember.sharding.partition_spec import PartitionSpec

__all__ = ["DeviceProgram", "DeviceSpan", "compile_device_program", "threads_per_device"]


@dataclass(frozen=True)
class DeviceSpan:
    """A mesh axis seen from one device thread (the interface of
    ``ember.distributed.spmd.ProcessSpan``, one shard per thread): ``size`` devices
    along it, this one at ``position`` (a traced int32, read from ``coords``)."""

    axis: Any
    size: int
    position: Any
    program: str
    local = 1

    @property
    def ranks(self) -> tuple[tuple[Any, int], ...]:
        """The peers along the axis, relative to the calling device (the same for every
        device: see ``DeviceCommunicator._peers``)."""
        return tuple((self.axis, j) for j in range(self.size))

    def _process_span(self) -> Any:
        from ember.distributed.spmd import ProcessSpan

        # (reduce and exchange read neither offset: 0 stands for "not used")
        return ProcessSpan(self.axis, self.size, 1, 0, self.ranks, self.program)

    def reduce(self, kind: str, x: Any, dim: int | None) -> Any:
        return self._process_span().reduce(kind, x, dim)

    def exchange(self, x: Any) -> Any:
        return self._process_span().exchange(x)

    def gather(self, x: Any, dim: int | None) -> Any:
        from ember.distributed.process_collectives import process_gather_p
        from ember.ops.rules import move_batch_axis

        # offset=None: the body's own gradients transpose all_gather before its batch
        # rule runs, so this gather is never transposed (a transpose would raise).
        return process_gather_p.bind(move_batch_axis(x, dim, 0, 1), ranks=self.ranks,
                                     offset=None,
                                     site=self._process_span()._site("all_gather"))

    def mine(self, x: Any, axis: int) -> Any:
        from ember.ops.structural import dynamic_slice_in_dim

        return dynamic_slice_in_dim(x, self.position, 1, axis=axis)

    def sources(self, source: np.ndarray) -> Any:
        from ember.ops.structural import dynamic_slice_in_dim

        return dynamic_slice_in_dim(np.asarray(source, np.int32), self.position, 1)

    def axis_index(self) -> Any:
        from ember.ops.structural import reshape

        return reshape(self.position, (1,))


@contextlib.contextmanager
def _device_spans(spans: dict[Any, DeviceSpan]) -> Iterator[None]:
    """The collectives over the mesh axes of ``spans`` go through them while the body
    is traced (the hook a mesh across processes uses too, which stays the fallback)."""
    from ember.ops import collectives

    outer = collectives.process_span
    collectives.process_span = lambda axis_name: spans.get(axis_name) or outer(axis_name)
    try:
        yield
    finally:
        collectives.process_span = outer


def threads_per_device(devices: int) -> int:
    """Each device's share of the cores (with more devices than cores, one each: they
    take turns)."""
    return max(1, int(config.num_threads or os.cpu_count() or 1) // devices)


@dataclass
class DeviceProgram:
    """The compiled per-device program: ``compiled(coords, *blocks)`` gives the flat
    per-device outputs; ``out_specs`` / ``out_tree`` / ``out_avals`` describe them."""

    compiled: Any
    out_specs: list[PartitionSpec]
    out_tree: PyTreeDef
    out_avals: list[ShapedArray]


def compile_device_program(f: Callable, mesh: Mesh, in_tree: PyTreeDef,
                           specs: Sequence[PartitionSpec], out_specs: Any, check_vma: bool,
                           name: str, block_avals: Sequence[ShapedArray]) -> DeviceProgram:
    """Trace ``f`` once at the per-device shapes ``block_avals`` and compile it for the
    mesh's backend, with each device's share of the cores."""
    from ember.runtime.jit import jit
    from ember.runtime.shape_dtype import ShapeDtypeStruct
    from ember.sharding.shard_map import _specs_per_leaf, shard_map

    one = Mesh(mesh.devices[(slice(0, 1),) * mesh.devices.ndim], mesh.axis_names,
               mesh.axis_types)
    program = f"per-device program of shard_map of {name}"
    box: dict[str, Any] = {}

    def per_device(coords: Any, *blocks: Any) -> list[Any]:
        spans = {axis: DeviceSpan(axis, size, coords[k], program)
                 for k, (axis, size) in enumerate(mesh.shape.items())}
        body = shard_map(f, mesh=one, in_specs=tree_unflatten(in_tree, list(specs)),
                         out_specs=out_specs, check_vma=check_vma)
        with _device_spans(spans):
            outs, box["tree"] = tree_flatten(body(*tree_unflatten(in_tree, list(blocks))))
        return outs

    per_device.__name__ = program
    arguments = [ShapeDtypeStruct((mesh.devices.ndim,), np.int32),
                 *[ShapeDtypeStruct(a.shape, a.dtype) for a in block_avals]]
    platform = mesh.devices.flat[0].platform
    # One thread team per device, each on its share of the cores: not pinned to cores
    # (every team would take the same ones).
    with config.override(num_threads=threads_per_device(mesh.size), pin_threads=False):
        compiled = jit(per_device, backend=platform).lower(*arguments).compile()
    out_tree = box["tree"]
    flat_specs = _specs_per_leaf(out_specs, tree_unflatten(
        out_tree, list(range(out_tree.num_leaves))), "out_specs", name)
    return DeviceProgram(compiled, flat_specs, out_tree,
                         list(compiled.executable.graph.out_avals))
