"""Checkpoints: pytrees of arrays saved as safetensors files (no pickle, ever).

Each leaf is stored under its path in the tree (``"blocks.0.attn.qkv.weight"``). Saving
is atomic: the file is written beside the target, flushed to disk and renamed over it,
so a crash mid-save leaves the previous checkpoint intact. Loading takes a *target* tree
(the structure, shapes and dtypes you expect: a model built with ``init``, or the
optimizer state) and fails clearly on any mismatch.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import tempfile
from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.errors import EmberTypeError, EmberValueError

__all__ = ["save", "load", "leaf_paths"]

# safetensors dtype codes of the dtypes a checkpoint can hold
_DTYPES = {
    "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16,
    "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
    "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8,
    "BOOL": dtypes.bool_, "C64": dtypes.complex64,
}
if dtypes.bfloat16 is not None:
    _DTYPES["BF16"] = dtypes.bfloat16


def _child_keys(node: PyTreeDef) -> list[str]:
    """Names of a node's children: dict keys, namedtuple / dataclass fields, or indices."""
    kind = node.node_type
    if kind in (dict, collections.OrderedDict):
        return [str(key) for key in node.aux]
    if kind is collections.defaultdict:
        return [str(key) for key in node.aux[1]]
    if hasattr(kind, "_fields"):
        return list(kind._fields)
    if dataclasses.is_dataclass(kind):
        data = [f.name for f in dataclasses.fields(kind) if not f.metadata.get("static", False)]
        if len(data) == len(node.children):
            return data
    return [str(i) for i in range(len(node.children))]


def leaf_paths(treedef: PyTreeDef) -> list[str]:
    """Dotted key paths of every leaf, in the order of ``tree_flatten``."""
    paths: list[str] = []

    def walk(node: PyTreeDef, prefix: str) -> None:
        if node.node_type is None:
            paths.append(prefix or "value")
            return
        for key, child in zip(_child_keys(node), node.children):
            walk(child, f"{prefix}.{key}" if prefix else key)

    walk(treedef, "")
    duplicates = sorted({p for p in paths if paths.count(p) > 1})
    if duplicates:
        raise EmberValueError(f"leaves of this tree share the checkpoint names {duplicates}; "
                              "rename the dict keys that contain dots")
    return paths


def _code_of(dtype: np.dtype, name: str) -> str:
    for code, candidate in _DTYPES.items():
        if candidate == dtype:
            return code
    raise EmberTypeError(f"leaf {name!r} has dtype {dtype}, which a safetensors checkpoint "
                         f"cannot hold; supported: {', '.join(d.name for d in _DTYPES.values())}")


def save(path: str | os.PathLike, tree: Any, metadata: dict[str, str] | None = None) -> None:
    """Write every array leaf of ``tree`` to the safetensors file ``path``, atomically."""
    import safetensors

    leaves, treedef = tree_flatten(tree)
    arrays = [np.asarray(leaf, order="C") for leaf in leaves]
    specs = {}
    for name, array in zip(leaf_paths(treedef), arrays):
        _code_of(array.dtype, name)
        specs[name] = safetensors.TensorSpec(dtype=array.dtype.name, shape=list(array.shape),
                                             data_ptr=array.ctypes.data, data_len=array.nbytes)
    payload = safetensors.serialize(specs, metadata=metadata)  # `arrays` keeps the data alive
    _atomic_write(os.fspath(path), payload)


def _atomic_write(path: str, payload: bytes) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ember-ckpt-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def load(path: str | os.PathLike, target: Any) -> Any:
    """Read a checkpoint into the structure of ``target``; every leaf's shape and dtype
    must match the stored one (leaves of ``target`` may be arrays or shape/dtype structs)."""
    import safetensors

    from ember.runtime.dispatch import device_put

    with open(path, "rb") as handle:
        stored = dict(safetensors.deserialize(handle.read()))
    leaves, treedef = tree_flatten(target)
    names = leaf_paths(treedef)
    missing = [n for n in names if n not in stored]
    unexpected = sorted(set(stored) - set(names))
    if missing or unexpected:
        raise EmberValueError(f"checkpoint {os.fspath(path)} does not match the target tree: "
                              f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    out = []
    for name, leaf in zip(names, leaves):
        entry = stored[name]
        array = np.frombuffer(entry["data"], dtype=_DTYPES[entry["dtype"]]).reshape(entry["shape"])
        want_shape = tuple(np.shape(leaf))
        want_dtype = np.dtype(leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype)
        if array.shape != want_shape:
            raise EmberValueError(f"checkpoint entry {name!r} has shape {array.shape}, but the "
                                  f"target expects {want_shape}")
        if array.dtype != want_dtype:
            raise EmberTypeError(f"checkpoint entry {name!r} has dtype {array.dtype}, but the "
                                 f"target expects {want_dtype}")
        out.append(device_put(array))
    return tree_unflatten(treedef, out)
