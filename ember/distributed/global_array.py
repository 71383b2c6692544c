"""Arrays that span processes: each process holds its block, the part its devices hold.

``GlobalArray`` is an Ember Array whose buffer is this process's block (that is what
``jit`` and ``shard_map`` see of it), with the global shape and sharding of the whole;
``addressable_shards`` are this process's shards. Its value, where it spans processes,
is read with ``multihost_utils.process_allgather``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember.errors import EmberValueError
from ember.runtime.array import Array, from_host
from ember.sharding.shardings import NamedSharding, Shard

__all__ = ["GlobalArray", "make_array_from_callback", "make_array_from_process_local_data",
           "process_region"]


class GlobalArray(Array):
    """A global array of ``sharding``; this process holds ``local_data``."""

    __slots__ = ("_global_shape",)

    def __init__(self, local: Array, sharding: NamedSharding, global_shape: Sequence[int]):
        # Not committed: host devices share memory, and jit runs the block on the
        # backend's own device whatever local device is named here.
        super().__init__(local.live_buffer(), local.aval, local.device, committed=False)
        self._sharding = sharding
        self._global_shape = tuple(int(n) for n in global_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._global_shape

    @property
    def ndim(self) -> int:
        return len(self._global_shape)

    @property
    def size(self) -> int:
        return math.prod(self._global_shape)

    @property
    def local_data(self) -> Array:
        """This process's block, as a plain Array."""
        return Array(self.live_buffer(), self.aval, self.device, committed=True)

    @property
    def is_fully_addressable(self) -> bool:
        return len({d.process_index for d in self._sharding.device_set}) == 1

    @property
    def addressable_shards(self) -> list[Shard]:
        """This process's shards: each local device's part, with its global index."""
        from ember.distributed.state import process_index

        region = process_region(self._sharding, self._global_shape)
        host = self._host()
        shards = []
        for device, index in self._sharding.devices_indices_map(self._global_shape).items():
            if device.process_index == process_index():
                local = tuple(_shift(s, r.start, n) for s, r, n in
                              zip(index, region, self._global_shape))
                shards.append(Shard(device, index, from_host(host[local], device,
                                                             committed=True)))
        return shards

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self.aval.shape != self._global_shape:
            raise EmberValueError(
                f"this array of shape {self._global_shape} spans processes; this process "
                f"holds only its block {self.aval.shape}. Gather it with ember.experimental"
                ".multihost_utils.process_allgather(x, tiled=True), or read "
                "x.addressable_shards")
        return super().__array__(dtype, copy)

    def __repr__(self) -> str:
        return (f"GlobalArray(shape={self._global_shape}, dtype={self.dtype}, block of this "
                f"process {self.aval.shape}, sharding={self._sharding!r})")


def _shift(index: slice, start: int, size: int) -> slice:
    lo, hi, _ = index.indices(size)
    return slice(lo - start, hi - start)


def process_region(sharding: NamedSharding, global_shape: Sequence[int],
                   process: int | None = None) -> tuple[slice, ...]:
    """The block of an array of ``global_shape`` that ``process`` (default: this one)
    holds under ``sharding``: per dimension, the span of its devices' indices."""
    from ember.distributed.state import process_index

    me = process_index() if process is None else process
    global_shape = tuple(global_shape)
    starts = [n for n in global_shape]
    stops = [0] * len(global_shape)
    pieces = set()
    for device, index in sharding.devices_indices_map(global_shape).items():
        if device.process_index != me:
            continue
        bounds = tuple(s.indices(n)[:2] for s, n in zip(index, global_shape))
        pieces.add(bounds)
        for d, (lo, hi) in enumerate(bounds):
            starts[d], stops[d] = min(starts[d], lo), max(stops[d], hi)
    if not pieces:
        raise EmberValueError(f"process {me} has no device in {sharding!r}")
    covered = sum(math.prod(hi - lo for lo, hi in b) for b in pieces)
    if covered != math.prod(b - a for a, b in zip(starts, stops)):
        raise EmberValueError(f"the shards of process {me} under {sharding!r} do not form "
                              "one block of the array; split it so that each process's "
                              "devices hold a contiguous block")
    return tuple(slice(a, b) for a, b in zip(starts, stops))


def _local_home(sharding: NamedSharding):
    from ember.distributed.state import process_index

    return next(d for d in sharding.mesh.devices.flat if d.process_index == process_index())


def _inferred_shape(sharding: NamedSharding, local_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The global shape whose block here has ``local_shape`` (JAX's inference)."""
    from ember.distributed.spmd import process_blocks

    blocks = process_blocks(sharding.mesh)
    if blocks is None:
        return local_shape
    start, stop = next(iter(blocks.values()))
    local_axes = dict(zip(sharding.mesh.axis_names, (b - a for a, b in zip(start, stop))))
    shape = []
    for dim, n in enumerate(local_shape):
        scale = 1
        for axis in sharding.spec.axes_of(dim):
            scale *= sharding.mesh.shape[axis] // local_axes[axis]
        shape.append(n * scale)
    return tuple(shape)


def make_array_from_process_local_data(sharding: NamedSharding, local_data: Any,
                                       global_shape: Sequence[int] | None = None) -> Array:
    """The global array of ``sharding`` whose block on this process is ``local_data``
    (as ``jax.make_array_from_process_local_data``); ``global_shape`` defaults to the
    one that block implies."""
    host = np.asarray(local_data)
    if global_shape is None:
        global_shape = _inferred_shape(sharding, host.shape)
    global_shape = tuple(global_shape)
    region = process_region(sharding, global_shape)
    expected = tuple(s.stop - s.start for s in region)
    if host.shape != expected:
        raise EmberValueError(
            f"make_array_from_process_local_data: this process holds the block {expected} "
            f"of the global shape {global_shape} under {sharding.spec}, but local_data has "
            f"shape {host.shape}; pass this process's block")
    local = from_host(host, _local_home(sharding), committed=True)
    return GlobalArray(local, sharding, global_shape)


def make_array_from_callback(shape: Sequence[int], sharding: NamedSharding,
                             data_callback: Callable[[tuple[slice, ...]], Any]) -> Array:
    """The global array of ``shape`` whose shard at ``index`` is
    ``data_callback(index)``, called for this process's devices only (as
    ``jax.make_array_from_callback``)."""
    from ember.distributed.state import process_index

    shape = tuple(shape)
    region = process_region(sharding, shape)
    block = None
    for device, index in sharding.devices_indices_map(shape).items():
        if device.process_index != process_index():
            continue
        piece = np.asarray(data_callback(index))
        if block is None:
            block = np.empty(tuple(s.stop - s.start for s in region), piece.dtype)
        local = tuple(_shift(s, r.start, n) for s, r, n in zip(index, region, shape))
        block[local] = piece
    return make_array_from_process_local_data(sharding, block, shape)
