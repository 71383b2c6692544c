"""Helpers for programs of several processes (as ``jax.experimental.multihost_utils``):
gather a value from every process, broadcast process 0's, wait for every process.

Each is a collective: every process must call it, in the same order; one that does
not is named within ``config.distributed_timeout`` (see ``ember.distributed``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core.pytree import tree_map

__all__ = ["broadcast_one_to_all", "process_allgather", "sync_global_devices"]


def _everyone() -> tuple[int, ...]:
    from ember.distributed.state import process_count

    return tuple(range(process_count()))


def _gathered_leaf(x: Any, tiled: bool) -> np.ndarray:
    from ember.distributed.global_array import GlobalArray, process_region
    from ember.distributed.host_collectives import allgather
    from ember.distributed.state import is_initialized

    if isinstance(x, GlobalArray):  # the global array, assembled from every block
        block = np.asarray(x.local_data)
        if not is_initialized():
            return block
        blocks = allgather(block, _everyone(), "process_allgather of a global array")
        out = np.empty(x.shape, block.dtype)
        for process, part in enumerate(blocks):
            out[process_region(x.sharding, x.shape, process)] = part
        return out
    value = np.asarray(x)
    if not is_initialized():
        return value if tiled else value[None]
    gathered = allgather(value, _everyone(), "process_allgather")
    return np.concatenate(list(gathered), axis=0) if tiled else gathered


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Each leaf from every process, as NumPy: stacked on a new axis 0 in process order
    (``tiled``: concatenated along axis 0). A global array spanning processes comes back
    whole (its global value)."""
    return tree_map(lambda leaf: _gathered_leaf(leaf, tiled), in_tree)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Process 0's value of each leaf on every process (as NumPy). ``is_source`` picks
    another single source process (True on exactly one)."""
    from ember.distributed.host_collectives import allgather, broadcast
    from ember.distributed.state import is_initialized

    if not is_initialized():
        return tree_map(np.asarray, in_tree)
    root = 0
    if is_source is not None:
        flags = allgather(np.array(bool(is_source)), _everyone(), "broadcast_one_to_all source")
        if int(flags.sum()) != 1:
            from ember.distributed.errors import DistributedError

            raise DistributedError(f"broadcast_one_to_all: is_source must be True on exactly "
                                   f"one process, got it on {int(flags.sum())}")
        root = int(np.argmax(flags))
    return tree_map(lambda leaf: broadcast(np.asarray(leaf), root, "broadcast_one_to_all"),
                    in_tree)


def sync_global_devices(name: str) -> None:
    """Wait until every process has called ``sync_global_devices(name)``; processes that
    pass different names get an error naming both."""
    from ember.distributed.host_collectives import barrier
    from ember.distributed.state import is_initialized

    if is_initialized():
        barrier(name)
