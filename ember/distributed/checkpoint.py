"""Checkpoints of arrays that span processes: each process writes its own blocks (one
safetensors file per process, ``ember.serialization``'s atomic writer), process 0 the
index of where every block of every leaf lies. Restoring reads, on each process, the
parts of the blocks that its new block overlaps, so a checkpoint written by N processes
restores onto M, on any sharding.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from ember.core.pytree import tree_flatten, tree_unflatten
from ember.errors import EmberValueError
from ember.sharding.shardings import NamedSharding

__all__ = ["restore", "save"]

_INDEX = "index.json"
_FORMAT = "ember-sharded-checkpoint-1"


def _file(process: int) -> str:
    return f"process-{process:05d}.safetensors"


def _regions(leaf: Any) -> tuple[NamedSharding | None, list[tuple[slice, ...]]]:
    """The leaf's sharding and each process's block of it (None: whole on every one)."""
    from ember.distributed.global_array import process_region
    from ember.distributed.state import process_count

    sharding = getattr(leaf, "_sharding", None)
    shape = tuple(np.shape(leaf))
    if not isinstance(sharding, NamedSharding):
        return None, [tuple(slice(0, n) for n in shape)] * process_count()
    return sharding, [process_region(sharding, shape, p) for p in range(process_count())]


def save(directory: str | os.PathLike, tree: Any) -> None:
    """Write ``tree`` (a pytree of arrays, global ones among them) under ``directory``:
    every process calls it with its own blocks."""
    from ember import serialization
    from ember.distributed.host_collectives import barrier
    from ember.distributed.state import is_initialized, process_index

    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    leaves, treedef = tree_flatten(tree)
    me = process_index()
    mine, index = {}, {}
    for name, leaf in zip(serialization.leaf_paths(treedef), leaves):
        _, regions = _regions(leaf)
        blocks = []
        for process, region in enumerate(regions):
            if regions.index(region) != process:
                continue  # the same block as an earlier process's: stored once
            blocks.append({"file": _file(process), "start": [s.start for s in region],
                           "stop": [s.stop for s in region]})
            if process == me:
                mine[name] = np.asarray(getattr(leaf, "local_data", leaf))
        index[name] = {"shape": list(np.shape(leaf)),
                       "dtype": str(np.dtype(leaf.dtype)), "blocks": blocks}
    serialization.save(os.path.join(directory, _file(me)), mine)
    if me == 0:
        payload = {"format": _FORMAT, "leaves": index}
        with open(os.path.join(directory, _INDEX + ".tmp"), "w") as out:
            json.dump(payload, out)
        os.replace(os.path.join(directory, _INDEX + ".tmp"), os.path.join(directory, _INDEX))
    if is_initialized():
        barrier(f"checkpoint save {directory}")


def restore(directory: str | os.PathLike, target: Any) -> Any:
    """The checkpoint under ``directory`` in the structure of ``target``: a pytree whose
    leaves are shardings (``NamedSharding``: the leaf restored as a global array of it)
    or arrays / shape-dtype structs (restored whole on every process)."""
    from safetensors import safe_open

    from ember import serialization
    from ember.distributed.global_array import (
        make_array_from_process_local_data, process_region)
    from ember.runtime.dispatch import device_put

    directory = os.fspath(directory)
    with open(os.path.join(directory, _INDEX)) as handle:
        index = json.load(handle)
    if index.get("format") != _FORMAT:
        raise EmberValueError(f"{directory} is not an Ember sharded checkpoint")
    is_sharding = lambda x: isinstance(x, NamedSharding)  # noqa: E731
    leaves, treedef = tree_flatten(target, is_leaf=is_sharding)
    names = serialization.leaf_paths(treedef)
    missing = [n for n in names if n not in index["leaves"]]
    if missing:
        raise EmberValueError(f"checkpoint {directory} has no leaves {missing[:5]}; it "
                              f"holds {sorted(index['leaves'])[:5]}...")
    files: dict[str, Any] = {}
    out = []
    try:
        for name, leaf in zip(names, leaves):
            entry = index["leaves"][name]
            shape = tuple(entry["shape"])
            if is_sharding(leaf):
                region = process_region(leaf, shape)
            else:
                region = tuple(slice(0, n) for n in shape)
            block = _read(directory, files, safe_open, name, entry, region)
            out.append(make_array_from_process_local_data(leaf, block, shape)
                       if is_sharding(leaf) else device_put(block))
    finally:
        files.clear()
    return tree_unflatten(treedef, out)


def _read(directory: str, files: dict, safe_open: Any, name: str, entry: dict,
          region: tuple[slice, ...]) -> np.ndarray:
    """The part ``region`` of leaf ``name``, assembled from the stored blocks."""
    block = np.empty(tuple(s.stop - s.start for s in region), np.dtype(entry["dtype"]))
    filled = 0
    for stored in entry["blocks"]:
        lo = [max(a, s.start) for a, s in zip(stored["start"], region)]
        hi = [min(b, s.stop) for b, s in zip(stored["stop"], region)]
        if any(a >= b for a, b in zip(lo, hi)):
            continue
        if stored["file"] not in files:
            files[stored["file"]] = safe_open(os.path.join(directory, stored["file"]),
                                              framework="numpy")
        source = tuple(slice(a - s, b - s) for a, b, s in zip(lo, hi, stored["start"]))
        target = tuple(slice(a - r.start, b - r.start) for a, b, r in zip(lo, hi, region))
        part = files[stored["file"]].get_slice(name)[source] if block.ndim else \
            files[stored["file"]].get_tensor(name)
        block[target] = part
        filled += math.prod(b - a for a, b in zip(lo, hi))
    if filled != block.size:
        raise EmberValueError(f"checkpoint {directory}: the stored blocks of {name!r} do not "
                              "cover this process's part; a process's file is missing?")
    return block
