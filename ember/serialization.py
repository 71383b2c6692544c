"""Checkpoints: pytrees of arrays saved as safetensors files (no pickle, ever).

Each leaf is stored under its path in the tree (``"layers.0.w"``). Saving is atomic:
the file is written beside the target, flushed to disk and renamed over it, so a
crash mid-save leaves the previous checkpoint intact. Loading takes a *target* tree
(the structure, shapes and dtypes you expect) and fails clearly on any mismatch.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.errors import EmberValueError

# safetensors dtype codes <-> NumPy dtypes
_CODES = {
    "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16,
    "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
    "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8,
    "BOOL": dtypes.bool_, "C64": dtypes.complex64,
}
if dtypes.bfloat16 is not None:
    _CODES["BF16"] = dtypes.bfloat16
_SPEC_NAMES = {"BOOL": "bool", "BF16": "bfloat16", "C64": "complex64"}


def _code_of(dtype: np.dtype) -> str:
    for code, candidate in _CODES.items():
        if candidate == dtype:
            return code
    raise EmberValueError(f"dtype {dtype} cannot be stored in a safetensors checkpoint")


def _spec_name(code: str) -> str:
    if code in _SPEC_NAMES:
        return _SPEC_NAMES[code]
    return np.dtype(_CODES[code]).name


def leaf_paths(treedef: PyTreeDef) -> list[str]:
    """Dotted key paths of every leaf (dict keys, sequence indices, dataclass fields)."""
    paths: list[str] = []

    def walk(node: PyTreeDef, prefix: str) -> None:
        if node.node_type is None:
            paths.append(prefix or "value")
            return
        aux = node.aux
        if node.node_type is dict or (isinstance(aux, tuple) and len(aux) == len(node.children)
                                      and all(isinstance(k, str) for k in aux)):
            keys = [str(k) for k in aux]
        elif hasattr(node.node_type, "_fields"):
            keys = list(node.node_type._fields)
        elif hasattr(node.node_type, "__dataclass_fields__"):
            keys = _dataclass_data_fields(node.node_type, len(node.children))
        else:
            keys = [str(i) for i in range(len(node.children))]
        for key, child in zip(keys, node.children):
            walk(child, f"{prefix}.{key}" if prefix else key)

    walk(treedef, "")
    return paths


def _dataclass_data_fields(cls: type, count: int) -> list[str]:
    names = [name for name, f in cls.__dataclass_fields__.items()
             if not f.metadata.get("static", False)]
    return names[:count] if len(names) >= count else [str(i) for i in range(count)]


def save(path: str | os.PathLike, tree: Any, metadata: dict[str, str] | None = None) -> None:
    """Write every array leaf of ``tree`` to ``path`` atomically."""
    import safetensors

    leaves, treedef = tree_flatten(tree)
    arrays = [np.ascontiguousarray(np.asarray(leaf)) for leaf in leaves]
    specs = {}
    for name, array in zip(leaf_paths(treedef), arrays):
        code = _code_of(array.dtype)
        specs[name] = safetensors.TensorSpec(dtype=_spec_name(code), shape=list(array.shape),
                                             data_ptr=array.ctypes.data, data_len=array.nbytes)
    payload = safetensors.serialize(specs, metadata=metadata)
    _atomic_write(os.fspath(path), payload)


def _atomic_write(path: str, payload: bytes) -> None:
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


def load(path: str | os.PathLike, target: Any) -> Any:
    """Read a checkpoint into the structure of ``target`` (shapes and dtypes must match)."""
    import safetensors

    from ember.runtime.dispatch import device_put

    with open(path, "rb") as handle:
        stored = dict(safetensors.deserialize(handle.read()))
    leaves, treedef = tree_flatten(target)
    names = leaf_paths(treedef)
    missing = [n for n in names if n not in stored]
    unexpected = [n for n in stored if n not in set(names)]
    if missing or unexpected:
        raise EmberValueError(f"checkpoint {os.fspath(path)} does not match the target tree: "
                              f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    out = []
    for name, leaf in zip(names, leaves):
        entry = stored[name]
        dtype = _CODES[entry["dtype"]]
        array = np.frombuffer(bytes(entry["data"]), dtype=dtype).reshape(entry["shape"])
        want_shape, want_dtype = np.shape(leaf), np.asarray(leaf).dtype
        if array.shape != tuple(want_shape) or array.dtype != want_dtype:
            raise EmberValueError(
                f"checkpoint entry {name!r} is {array.dtype}{list(array.shape)}, but the target "
                f"expects {want_dtype}{list(want_shape)}")
        out.append(device_put(array))
    return tree_unflatten(treedef, out)
