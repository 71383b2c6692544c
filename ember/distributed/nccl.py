"""NCCL for CUDA devices: collectives across processes on device buffers, queued on
Ember's own CUDA stream, through ``libnccl`` from the ``nvidia-nccl-cu13`` wheel
(``ctypes``, no binding package). The communicator's unique id is made by the first
process of the group and handed to the others over MPI.

Status: written and checked for its mechanics (library loading, the unique id's
exchange, the arguments of every call) against a stand-in library without a GPU; it
has not run on a GPU, and the CUDA backend does not yet route a shard_map's
cross-process collectives to it (the host-step path serves CPU devices).
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember.distributed.errors import DistributedError

__all__ = ["NcclCommunicator", "library_path", "load_library", "nccl_version"]

UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
# ncclDataType_t and ncclRedOp_t of nccl.h
DATA_TYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
              "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
REDUCTIONS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


def library_path() -> str | None:
    """libnccl.so.2 of the nvidia-nccl-cu13 wheel, if installed."""
    spec = importlib.util.find_spec("nvidia.nccl") if importlib.util.find_spec("nvidia") \
        else None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "lib", "libnccl.so.2")
        if os.path.exists(path):
            return path
    return None


def _declare(library: Any) -> Any:
    """The C signatures of the functions used here (nccl.h)."""
    p, i, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    signatures = {
        "ncclGetVersion": [ctypes.POINTER(i)],
        "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
        "ncclCommInitRank": [ctypes.POINTER(p), i, UniqueId, i],
        "ncclAllReduce": [p, p, size, i, i, p, p],
        "ncclAllGather": [p, p, size, i, p, p],
        "ncclCommDestroy": [p],
    }
    for name, argtypes in signatures.items():
        function = getattr(library, name)
        function.argtypes, function.restype = argtypes, i
    library.ncclGetErrorString.restype = ctypes.c_char_p
    return library


def load_library(path: str | None = None) -> Any | None:
    """The loaded libnccl (None where it is not installed)."""
    path = path or library_path()
    if path is None:
        return None
    return _declare(ctypes.CDLL(path))


def _check(library: Any, result: int, call: str) -> None:
    if result != 0:
        text = library.ncclGetErrorString(result)
        raise DistributedError(f"NCCL {call} failed ({result}: "
                               f"{text.decode() if isinstance(text, bytes) else text})")


def nccl_version(library: Any) -> int:
    version = ctypes.c_int()
    _check(library, library.ncclGetVersion(ctypes.byref(version)), "ncclGetVersion")
    return version.value


def _exchange_over_mpi(raw: np.ndarray, ranks: Sequence[int]) -> np.ndarray:
    """Every process's bytes; the first process of ``ranks`` holds the id."""
    from ember.distributed.host_collectives import allgather

    return allgather(raw, ranks, "NCCL unique id")[0]


class NcclCommunicator:
    """An NCCL communicator over the processes ``ranks`` (this one among them), one GPU
    each, whose operations are queued on ``stream`` (Ember's CUDA stream of the GPU)."""

    def __init__(self, library: Any, ranks: Sequence[int], rank: int, stream: int,
                 exchange: Callable[[np.ndarray, Sequence[int]], np.ndarray] =
                 _exchange_over_mpi) -> None:
        self.library, self.ranks, self.stream = library, tuple(ranks), stream
        self.position = self.ranks.index(rank)
        unique = UniqueId()
        if self.position == 0:
            _check(library, library.ncclGetUniqueId(ctypes.byref(unique)), "ncclGetUniqueId")
        raw = np.frombuffer(bytes(unique), np.uint8).copy()
        shared = np.ascontiguousarray(exchange(raw, self.ranks), np.uint8)
        ctypes.memmove(ctypes.addressof(unique), shared.ctypes.data, UNIQUE_ID_BYTES)
        self.comm = ctypes.c_void_p()
        _check(library, library.ncclCommInitRank(ctypes.byref(self.comm), len(self.ranks),
                                                 unique, self.position), "ncclCommInitRank")

    def all_reduce(self, send: int, receive: int, count: int, dtype: Any,
                   op: str = "sum") -> None:
        """Queue ``receive[:count] = op over processes of send[:count]`` (device
        pointers) on the stream."""
        _check(self.library, self.library.ncclAllReduce(
            send, receive, count, _data_type(dtype), REDUCTIONS[op], self.comm, self.stream),
            "ncclAllReduce")

    def all_gather(self, send: int, receive: int, count: int, dtype: Any) -> None:
        """Queue the gather of every process's ``send[:count]`` into ``receive``."""
        _check(self.library, self.library.ncclAllGather(
            send, receive, count, _data_type(dtype), self.comm, self.stream), "ncclAllGather")

    def close(self) -> None:
        if self.comm:
            _check(self.library, self.library.ncclCommDestroy(self.comm), "ncclCommDestroy")
            self.comm = ctypes.c_void_p()


def _data_type(dtype: Any) -> int:
    name = np.dtype(dtype).name
    if name not in DATA_TYPES:
        raise DistributedError(f"NCCL has no {name} collectives; supported: "
                               f"{', '.join(DATA_TYPES)}")
    return DATA_TYPES[name]
