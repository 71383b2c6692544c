"""Meshes: devices laid out on an n-dimensional grid with named axes (as ``jax.sharding``)."""
from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.backends.base import Device
from ember.errors import EmberValueError

__all__ = ["AxisType", "Mesh", "get_mesh", "make_mesh", "set_mesh"]


class AxisType(enum.Enum):
    """How a mesh axis is partitioned. ``Explicit``: shardings are part of array types
    (``ember.typeof``) and the user places data; ``Auto``: the compiler may choose;
    ``Manual``: the program is written per device (inside ``shard_map``)."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self) -> str:
        return self.name


class Mesh:
    """``devices`` (an array of Devices) with one name per axis."""

    def __init__(self, devices: Any, axis_names: Sequence[str] | str,
                 axis_types: Sequence[AxisType] | AxisType | None = None) -> None:
        grid = np.asarray(devices, dtype=object)
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if grid.ndim != len(names):
            raise EmberValueError(f"a mesh of shape {grid.shape} needs {grid.ndim} axis "
                                  f"names, got {names}")
        if len(set(names)) != len(names):
            raise EmberValueError(f"mesh axis names must be distinct, got {names}")
        if axis_types is None:
            axis_types = (AxisType.Explicit,) * len(names)
        elif isinstance(axis_types, AxisType):
            axis_types = (axis_types,) * len(names)
        if len(axis_types) != len(names):
            raise EmberValueError(f"mesh has {len(names)} axes but {len(axis_types)} "
                                  "axis_types were given")
        self.devices = grid
        self.axis_names = names
        self.axis_types = tuple(axis_types)

    @property
    def shape(self) -> dict[str, int]:
        """Axis name -> size, in axis order."""
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return int(self.devices.size)

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names
                and self.axis_types == other.axis_types
                and self.devices.shape == other.devices.shape
                and list(self.devices.flat) == list(other.devices.flat))

    def __hash__(self) -> int:
        return hash((self.axis_names, self.axis_types, tuple(self.devices.flat)))

    def __repr__(self) -> str:
        axes = ", ".join(f"{name!r}: {size}" for name, size in self.shape.items())
        return f"Mesh({axes}, axis_types={self.axis_types})"

    def __enter__(self) -> Mesh:
        _MESHES.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _MESHES.pop()


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str],
              axis_types: Sequence[AxisType] | None = None, *,
              devices: Sequence[Device] | None = None) -> Mesh:
    """A mesh of ``axis_shapes`` over the default backend's devices (as
    ``jax.make_mesh``; every axis is ``Explicit`` unless ``axis_types`` says otherwise)."""
    from ember.runtime.devices import default_backend, devices as backend_devices

    found = list(devices) if devices is not None else backend_devices(default_backend().name)
    wanted = math.prod(axis_shapes)
    if wanted != len(found):
        raise EmberValueError(
            f"make_mesh{tuple(axis_shapes)} needs {wanted} devices, but {len(found)} are "
            "available; change the mesh shape, or split the host CPU with "
            "ember.config.update('num_cpu_devices', N) (EMBER_NUM_CPU_DEVICES=N) before "
            "using any device")
    grid = np.empty(len(found), dtype=object)
    grid[:] = found
    return Mesh(grid.reshape(tuple(axis_shapes)), axis_names, axis_types)


_MESHES: list[Mesh] = []
_global_mesh: list[Mesh | None] = [None]


class set_mesh:  # noqa: N801  (a function in JAX; a class here so it works as `with`)
    """Make ``mesh`` the current mesh: for the rest of the program, or, used as
    ``with ember.set_mesh(mesh):``, until the block ends."""

    def __init__(self, mesh: Mesh) -> None:
        self.mesh = mesh
        self._previous = _global_mesh[0]
        _global_mesh[0] = mesh

    def __enter__(self) -> Mesh:
        return self.mesh

    def __exit__(self, *exc: Any) -> None:
        _global_mesh[0] = self._previous


def get_mesh() -> Mesh | None:
    """The current mesh (innermost ``with mesh`` / ``set_mesh``), or None."""
    return _MESHES[-1] if _MESHES else _global_mesh[0]


# Errors raised below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
