"""Checkpoints of sharded arrays: one safetensors file per device plus a JSON index.

``save(directory, tree)`` writes, for every device, the distinct shards it holds (a
shard replicated over several devices is written once, by the first of them), and then
``index.json``, which maps each leaf (named by its path in the tree, as in
``ember.serialization``) to its global shape, dtype, the sharding it was saved with, and
where each of its pieces lies. Every save writes files of new names, and the index last,
atomically: it is the commit point, so a crash mid-save leaves the previous checkpoint
whole and readable; the older files are removed once the new index is in place.

``restore(directory, target, shardings)`` assembles each leaf from its pieces and places
it on the sharding asked for, which may be on another mesh, with another spec, or one
device: restoring reshards. Per-device files are what each process of a multi-host run
will write for its own devices.
"""
from __future__ import annotations

import json
import os
import uuid
from typing import Any

import numpy as np

from ember.core.pytree import flatten_up_to, tree_flatten, tree_unflatten
from ember.errors import EmberTypeError, EmberValueError
from ember.serialization import _DTYPES, _atomic_write, _code_of, leaf_paths
from ember.sharding.partition_spec import PartitionSpec
from ember.sharding.placement import as_sharding, put_sharded
from ember.sharding.shardings import NamedSharding, Sharding

__all__ = ["restore", "save"]

INDEX = "index.json"
FORMAT = "ember-sharded-safetensors-1"
Bounds = tuple[tuple[int, int], ...]  # (start, stop) per dimension


def _bounds(index: tuple[slice, ...], shape: tuple[int, ...]) -> Bounds:
    return tuple((s.indices(n)[0], s.indices(n)[1]) for s, n in zip(index, shape))


def _file_of(save_id: str, device: Any) -> str:
    where = f"{device.platform}-{device.id:05d}" if device is not None else "host"
    return f"shards-{save_id}-{where}.safetensors"


def _describe(sharding: Sharding) -> dict[str, Any]:
    """The saved-with sharding, for people reading the index (restore does not need it)."""
    if isinstance(sharding, NamedSharding):
        return {"mesh": sharding.mesh.shape,
                "spec": [list(e) if isinstance(e, tuple) else e for e in sharding.spec]}
    return {"device": repr(next(iter(sharding.device_set)))}


def save(directory: str | os.PathLike, tree: Any) -> None:
    """Write every array leaf of ``tree`` (sharded or not) to ``directory``: each
    device's distinct shards to its own safetensors file, then the index."""
    import safetensors

    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    leaves, treedef = tree_flatten(tree)
    save_id = uuid.uuid4().hex[:12]  # new names: the old files stay whole until the index
    per_file: dict[str, dict[str, np.ndarray]] = {}
    entries: dict[str, Any] = {}
    for name, leaf in zip(leaf_paths(treedef), leaves):
        shape = tuple(int(n) for n in np.shape(leaf))
        sharding = getattr(leaf, "sharding", None)
        if sharding is None:  # a host value: one piece, in the first file
            shards = [(None, tuple(slice(None) for _ in shape), np.asarray(leaf))]
        else:
            shards = [(s.device, s.index, s.data) for s in leaf.addressable_shards]
        pieces, written = [], set()
        for device, index, data in shards:
            bounds = _bounds(index, shape)
            if bounds in written:
                continue  # a replica of a piece already written
            written.add(bounds)
            host = np.asarray(data, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
            file = _file_of(save_id, device)
            key = f"{name}#{len(pieces)}"
            per_file.setdefault(file, {})[key] = host
            pieces.append({"file": file, "key": key, "bounds": [list(b) for b in bounds]})
        dtype = np.asarray(shards[0][2]).dtype
        entries[name] = {"shape": list(shape), "dtype": _code_of(dtype, name),
                         "saved_sharding": _describe(sharding) if sharding is not None
                         else None, "pieces": pieces}
    for file, arrays in per_file.items():
        specs = {key: safetensors.TensorSpec(dtype=a.dtype.name, shape=list(a.shape),
                                             data_ptr=a.ctypes.data, data_len=a.nbytes)
                 for key, a in arrays.items()}
        _atomic_write(os.path.join(directory, file), safetensors.serialize(specs))
    index = {"format": FORMAT, "leaves": entries}
    _atomic_write(os.path.join(directory, INDEX), json.dumps(index, indent=1).encode())
    for stale in os.listdir(directory):  # files of an older checkpoint in this directory
        if stale.startswith("shards-") and stale not in per_file:
            os.unlink(os.path.join(directory, stale))


def _read_index(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, INDEX)
    if not os.path.exists(path):
        raise EmberValueError(f"{directory} holds no sharded checkpoint ({INDEX} is missing); "
                              "write one with ember.sharding.checkpoint.save, or read a "
                              "single-file checkpoint with ember.serialization.load")
    with open(path, "rb") as handle:
        index = json.loads(handle.read())
    if index.get("format") != FORMAT:
        raise EmberValueError(f"{path} has format {index.get('format')!r}, not {FORMAT!r}")
    return index["leaves"]


def _assemble(name: str, entry: dict[str, Any], files: dict[str, dict]) -> np.ndarray:
    """The global array of one leaf, from its pieces; every element must be covered."""
    dtype = _DTYPES[entry["dtype"]]
    shape = tuple(entry["shape"])
    out = np.empty(shape, dtype=dtype)
    covered = np.zeros(shape, dtype=bool)
    for piece in entry["pieces"]:
        stored = files[piece["file"]][piece["key"]]
        where = tuple(slice(a, b) for a, b in piece["bounds"])
        out[where] = np.frombuffer(stored["data"], dtype=dtype).reshape(stored["shape"])
        covered[where] = True
    if not covered.all():
        raise EmberValueError(f"checkpoint entry {name!r} is incomplete: its pieces cover "
                              f"{int(covered.sum())} of {covered.size} elements")
    return out


def restore(directory: str | os.PathLike, target: Any, shardings: Any = None) -> Any:
    """Read the checkpoint in ``directory`` into the structure of ``target`` (arrays or
    ``ShapeDtypeStruct``s whose shapes and dtypes must match the stored ones), placing
    each leaf on ``shardings``: one Sharding or PartitionSpec for every leaf, a pytree of
    them shaped as a prefix of ``target``, or None for each target leaf's own sharding
    (its ``.sharding`` attribute; the default device where it has none)."""
    import safetensors

    from ember.runtime.dispatch import device_put

    directory = os.fspath(directory)
    stored = _read_index(directory)
    leaves, treedef = tree_flatten(target)
    names = leaf_paths(treedef)
    missing = [n for n in names if n not in stored]
    unexpected = sorted(set(stored) - set(names))
    if missing or unexpected:
        raise EmberValueError(f"checkpoint {directory} does not match the target tree: "
                              f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    wanted = _shardings_per_leaf(shardings, target, leaves)
    files: dict[str, dict] = {}
    out = []
    for name, leaf, sharding in zip(names, leaves, wanted):
        entry = stored[name]
        for piece in entry["pieces"]:
            if piece["file"] not in files:
                with open(os.path.join(directory, piece["file"]), "rb") as handle:
                    files[piece["file"]] = dict(safetensors.deserialize(handle.read()))
        want_shape = tuple(np.shape(leaf))
        want_dtype = np.dtype(leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype)
        if tuple(entry["shape"]) != want_shape:
            raise EmberValueError(f"checkpoint entry {name!r} has shape "
                                  f"{tuple(entry['shape'])}, but the target expects "
                                  f"{want_shape}")
        if np.dtype(_DTYPES[entry["dtype"]]) != want_dtype:
            raise EmberTypeError(f"checkpoint entry {name!r} has dtype "
                                 f"{np.dtype(_DTYPES[entry['dtype']])}, but the target "
                                 f"expects {want_dtype}")
        value = _assemble(name, entry, files)
        out.append(device_put(value) if sharding is None
                   else put_sharded(value, sharding, what="restore"))
    return tree_unflatten(treedef, out)


def _is_target(x: Any) -> bool:
    return isinstance(x, (Sharding, PartitionSpec))


def _shardings_per_leaf(shardings: Any, target: Any, leaves: list[Any]) -> list[Any]:
    if shardings is None:
        return [_own_sharding(leaf) for leaf in leaves]
    if _is_target(shardings):
        return [as_sharding(shardings, "restore")] * len(leaves)
    targets, tree = tree_flatten(shardings, is_leaf=_is_target)
    parts = flatten_up_to(tree, target)
    found = []
    for sharding, part in zip(targets, parts):
        found += [as_sharding(sharding, "restore")] * len(tree_flatten(part)[0])
    return found


def _own_sharding(leaf: Any) -> Sharding | None:
    sharding = getattr(leaf, "sharding", None)
    return sharding if isinstance(sharding, Sharding) else None


# Errors raised below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
