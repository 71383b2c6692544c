"""Placing arrays on shardings: ``device_put(x, sharding)``, ``reshard``, shards.

On one host every device's memory is the host's (cpu, reference), so a sharded array
keeps its global buffer on the mesh's first device and its shards are views of it:
``np.asarray`` of a sharded array is the gathered array at no cost. Devices with memory
of their own (OpenCL, CUDA) will hold one buffer per shard (not yet).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core.pytree import flatten_up_to, tree_flatten, tree_map, tree_unflatten
from ember.errors import EmberValueError
from ember.sharding.mesh import get_mesh
from ember.sharding.partition_spec import PartitionSpec
from ember.sharding.shardings import NamedSharding, Shard, Sharding

__all__ = ["is_sharding_spec", "put_sharded", "reshard", "shards_of"]


def is_sharding_spec(target: Any) -> bool:
    """Whether ``device_put``'s target is (a pytree of) shardings or PartitionSpecs."""
    leaves, _ = tree_flatten(target, is_leaf=_is_leaf)
    return bool(leaves) and all(isinstance(leaf, (Sharding, PartitionSpec)) for leaf in leaves)


def _is_leaf(x: Any) -> bool:
    return isinstance(x, (Sharding, PartitionSpec))


def as_sharding(target: Sharding | PartitionSpec, what: str) -> Sharding:
    if isinstance(target, Sharding):
        return target
    mesh = get_mesh()
    if mesh is None:
        raise EmberValueError(f"{what} was given a PartitionSpec {target} but no mesh is "
                              "set; wrap the call in `with ember.set_mesh(mesh):` or pass "
                              "NamedSharding(mesh, spec)")
    return NamedSharding(mesh, target)


def put_sharded(value: Any, target: Any, what: str = "device_put") -> Any:
    """``value`` (a pytree) split as ``target`` says: one sharding for every leaf, or a
    pytree of them shaped as a prefix of ``value``."""
    from ember.runtime.dispatch import device_put

    if _is_leaf(target):
        sharding = as_sharding(target, what)
        return tree_map(lambda leaf: _put_leaf(device_put(leaf, _home(sharding)), sharding),
                        value)
    targets, tree = tree_flatten(target, is_leaf=_is_leaf)
    parts = flatten_up_to(tree, value)
    return tree_unflatten(tree, [put_sharded(part, t, what) for part, t in zip(parts, targets)])


def _home(sharding: Sharding):
    """The device that holds the global buffer of an array of ``sharding``."""
    if isinstance(sharding, NamedSharding):
        return sharding.mesh.devices.flat[0]
    return next(iter(sharding.device_set))


def _put_leaf(array: Any, sharding: Sharding) -> Any:
    from ember.runtime.array import Array

    sharding.shard_shape(array.shape)  # a clear error for an uneven split
    placed = Array(array.live_buffer(), array.aval, array.device, committed=True)
    placed._sharding = sharding if isinstance(sharding, NamedSharding) else None
    return placed


def reshard(x: Any, target: Any) -> Any:
    """``x`` with a new sharding (a Sharding or a PartitionSpec under ``set_mesh``), as
    ``jax.reshard``."""
    return put_sharded(x, target, what="reshard")


def shards_of(array: Any) -> list[Shard]:
    """``array.addressable_shards``: each device's part, as an Array on that device."""
    from ember.runtime.array import from_host

    host = array._host()
    found = []
    for device, index in array.sharding.devices_indices_map(array.shape).items():
        part = np.asarray(host[index])  # a 0-d array, not a NumPy scalar, for a scalar
        found.append(Shard(device, index, from_host(part, device, committed=True)))
    return found


# Errors raised below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
