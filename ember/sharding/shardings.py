"""Shardings: how a global array is split into shards over devices (as ``jax.sharding``)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ember.backends.base import Device
from ember.errors import EmberValueError, user_errors
from ember.sharding.mesh import Mesh
from ember.sharding.partition_spec import PartitionSpec

__all__ = ["NamedSharding", "Shard", "Sharding", "SingleDeviceSharding"]

Index = tuple[slice, ...]


class Sharding:
    """Where each part of an array of a given shape lives."""

    def devices_indices_map(self, global_shape: tuple[int, ...]) -> dict[Device, Index]:
        raise NotImplementedError

    def shard_shape(self, global_shape: tuple[int, ...]) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def device_set(self) -> set[Device]:
        raise NotImplementedError

    @property
    def is_fully_replicated(self) -> bool:
        raise NotImplementedError

    @property
    def num_devices(self) -> int:
        return len(self.device_set)


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device: Device) -> None:
        self.device = device

    def devices_indices_map(self, global_shape: tuple[int, ...]) -> dict[Device, Index]:
        return {self.device: tuple(slice(None) for _ in global_shape)}

    def shard_shape(self, global_shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(global_shape)

    @property
    def device_set(self) -> set[Device]:
        return {self.device}

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SingleDeviceSharding) and other.device == self.device

    def __hash__(self) -> int:
        return hash(self.device)

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self.device!r})"


class NamedSharding(Sharding):
    """Dimensions split over named mesh axes: ``NamedSharding(mesh, P('data', None))``."""

    @user_errors
    def __init__(self, mesh: Mesh, spec: PartitionSpec | None = None) -> None:
        spec = PartitionSpec() if spec is None else spec
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec)
        used = spec.mesh_axes()
        for axis in used:
            if axis not in mesh.axis_names:
                raise EmberValueError(f"{spec} names mesh axis {axis!r}, which is not in "
                                      f"the mesh (axes {mesh.axis_names}); use one of them")
        if len(set(used)) != len(used):
            raise EmberValueError(f"{spec} uses a mesh axis more than once; each mesh axis "
                                  "may split at most one dimension")
        self.mesh = mesh
        self.spec = spec

    def _check(self, global_shape: tuple[int, ...]) -> None:
        if len(self.spec) > len(global_shape):
            raise EmberValueError(f"{self.spec} has {len(self.spec)} entries, more than the "
                                  f"{len(global_shape)} dimensions of an array of shape "
                                  f"{tuple(global_shape)}")
        for dim, size in enumerate(global_shape):
            axes = self.spec.axes_of(dim)
            parts = math.prod(self.mesh.shape[a] for a in axes)
            if size % parts:
                named = " x ".join(f"{a!r} (size {self.mesh.shape[a]})" for a in axes)
                raise EmberValueError(
                    f"cannot split dimension {dim} of size {size} (array shape "
                    f"{tuple(global_shape)}) evenly over mesh axis {named}: {size} is not "
                    f"a multiple of {parts}. Pad the array, or shard another dimension")

    def shard_shape(self, global_shape: tuple[int, ...]) -> tuple[int, ...]:
        self._check(global_shape)
        return tuple(size // math.prod(self.mesh.shape[a] for a in self.spec.axes_of(dim))
                     for dim, size in enumerate(global_shape))

    def devices_indices_map(self, global_shape: tuple[int, ...]) -> dict[Device, Index]:
        shard = self.shard_shape(global_shape)
        names = self.mesh.axis_names
        found: dict[Device, Index] = {}
        for position in itertools.product(*(range(n) for n in self.mesh.axis_sizes)):
            coord = dict(zip(names, position))
            index = []
            for dim, size in enumerate(shard):
                block = 0
                for axis in self.spec.axes_of(dim):  # major to minor
                    block = block * self.mesh.shape[axis] + coord[axis]
                axes = self.spec.axes_of(dim)
                index.append(slice(block * size, (block + 1) * size) if axes
                             else slice(None))
            found[self.mesh.devices[position]] = tuple(index)
        return found

    @property
    def device_set(self) -> set[Device]:
        return set(self.mesh.devices.flat)

    @property
    def is_fully_replicated(self) -> bool:
        return all(self.mesh.shape[a] == 1 for a in self.spec.mesh_axes())

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, NamedSharding) and other.mesh == self.mesh
                and _trimmed(other.spec) == _trimmed(self.spec))

    def __hash__(self) -> int:
        return hash((self.mesh, _trimmed(self.spec)))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def _trimmed(spec: PartitionSpec) -> tuple:
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


@dataclass(frozen=True)
class Shard:
    """One device's part of an array: ``data`` is ``array[index]`` on ``device``."""

    device: Device
    index: Index
    data: Any
