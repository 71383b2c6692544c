"""Collectives across processes on host (NumPy) arrays, through MPI.

Every one meets its peers first (``Guard.check``), then moves bytes with one or two
MPI collectives; data of up to ``INLINE_BYTES`` comes with the meeting instead. Data
moves as raw bytes, so any dtype works (bfloat16 too); sums are computed here in a fixed
order, the global order of the contributions, so the result is bitwise the same however
the contributions are split among processes.

A device thread of a per_device shard_map (one process, a thread per device) has its
collectives done through shared memory instead, by its ``DeviceMember``
(``ember.sharding.device_communicator``), in the same order.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from ember.distributed.guard import INLINE_BYTES
from ember.distributed.in_order import reduce_rows
from ember.distributed.state import current
from ember.sharding.device_communicator import current_member

__all__ = ["allgather", "alltoall", "barrier", "broadcast", "reduce_in_order"]


def _describe(op: str, array: np.ndarray, ranks: Sequence[int], what: str) -> str:
    return _description(op, array.dtype, array.shape, tuple(ranks), what)


@functools.lru_cache(maxsize=1024)  # a program's collectives repeat every step
def _description(op: str, dtype: np.dtype, shape: tuple[int, ...], ranks: tuple[int, ...],
                 what: str) -> str:
    return (f"{what}: " if what else "") + (
        f"{op} of {dtype}[{','.join(map(str, shape))}] over processes {list(ranks)}")


def _bytes(array: np.ndarray):
    from mpi4py import MPI

    return [np.ascontiguousarray(array).reshape(-1).view(np.uint8), MPI.BYTE]


def allgather(array: np.ndarray, ranks: Sequence[int], what: str = "") -> np.ndarray:
    """``array`` of every process of ``ranks`` (this one among them), stacked in the
    order of ``ranks``."""
    member = current_member()
    if member is not None:
        return member.allgather(array, ranks)
    job = current("allgather across processes")
    ranks = tuple(ranks)
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d one 1-d)
    description = _describe("allgather", array, ranks, what)
    if array.nbytes <= INLINE_BYTES or len(ranks) == 1:
        return job.guard.check(description, ranks, array)
    job.guard.check(description, ranks)
    out = np.empty((len(ranks), *array.shape), array.dtype)
    comm = job.communicator(ranks)
    job.guard.run(description, lambda: comm.Allgather(_bytes(array), _bytes_out(out)))
    return out


def alltoall(array: np.ndarray, ranks: Sequence[int], what: str = "") -> np.ndarray:
    """Block j of ``array`` (split into ``len(ranks)`` equal blocks on axis 0) goes to
    the process ``ranks[j]``; block i of the result came from ``ranks[i]``."""
    member = current_member()
    if member is not None:
        return member.alltoall(array, ranks)
    job = current("all_to_all across processes")
    ranks = tuple(ranks)
    array = np.ascontiguousarray(array)
    description = _describe("alltoall", array, ranks, what)
    job.guard.check(description, ranks)
    if len(ranks) == 1:
        return array
    out = np.empty_like(array)
    comm = job.communicator(ranks)
    job.guard.run(description, lambda: comm.Alltoall(_bytes(array), _bytes_out(out)))
    return out


def _bytes_out(out: np.ndarray):
    from mpi4py import MPI

    return [out.reshape(-1).view(np.uint8), MPI.BYTE]


def reduce_in_order(stacked: np.ndarray, ranks: Sequence[int], op: str = "sum",
                    what: str = "") -> np.ndarray:
    """The reduction (``sum``, ``max``, ``min``) of every contribution: ``stacked``
    holds this process's contributions on axis 0, the processes of ``ranks`` come in
    that order. A reduce-scatter (MPI Alltoall) gives each process one chunk of every
    contribution, which it reduces in order; an Allgather shares the chunks. Small
    buffers come whole with the meeting and are reduced in order on every process."""
    member = current_member()
    if member is not None:
        return member.reduce(np.asarray(stacked), ranks, lambda rows: reduce_rows(rows, op))
    job = current("a reduction across processes")
    ranks = tuple(ranks)
    stacked = np.ascontiguousarray(stacked)
    local, shape = stacked.shape[0], stacked.shape[1:]
    description = _describe(f"reduce({op})", stacked, ranks, what)
    count = len(ranks)
    if stacked.nbytes <= INLINE_BYTES or count == 1:  # latency-bound: with the meeting
        if op == "sum":
            return job.guard.check(description, ranks, stacked, total=True)
        every = job.guard.check(description, ranks, stacked)
        return reduce_rows(every.reshape(count * local, *shape), op)
    job.guard.check(description, ranks)
    comm = job.communicator(ranks)
    n = math.prod(shape)
    chunk = -(-n // count)
    flat = stacked.reshape(local, n)
    if chunk * count != n:
        padded = np.zeros((local, chunk * count), stacked.dtype)
        padded[:, :n] = flat
        flat = padded
    send = np.ascontiguousarray(flat.reshape(local, count, chunk).transpose(1, 0, 2))
    received = _scratch(send.nbytes).view(stacked.dtype)  # [source, its contribution, chunk]
    job.guard.run(description, lambda: comm.Alltoall(_bytes(send), _bytes_out(received)))
    # this process's chunk of the result reduced in place, then everyone's shared in place
    result = np.empty(count * chunk, stacked.dtype)
    mine = ranks.index(job.guard.rank)
    reduce_rows(received.reshape(count * local, chunk), op, result[mine * chunk:][:chunk])
    job.guard.run(description, lambda: comm.Allgather(_in_place(), _bytes_out(result)))
    return result[:n].reshape(shape)


_scratch_buffer = np.empty(0, np.uint8)


def _scratch(nbytes: int) -> np.ndarray:
    """``nbytes`` of memory reused by every call, kept for the process's later ones: a
    large reduction's received contributions, read once (fresh pages would cost the
    kernel's zeroing and a fault each). Collectives across processes run one at a time,
    in the guard's order."""
    global _scratch_buffer
    if _scratch_buffer.nbytes < nbytes:
        _scratch_buffer = np.empty(nbytes, np.uint8)
    return _scratch_buffer[:nbytes]


def _in_place():
    from mpi4py import MPI

    return MPI.IN_PLACE


def broadcast(array: np.ndarray, root: int = 0, what: str = "") -> np.ndarray:
    """Process ``root``'s ``array`` on every process (each passes one of the same
    shape and dtype)."""
    job = current("broadcast across processes")
    array = np.array(array, copy=True, order="C")
    ranks = tuple(range(job.num_processes))
    description = _describe(f"broadcast from {root}", array, ranks, what)
    job.guard.check(description, ranks)
    if job.num_processes > 1:
        job.guard.run(description, lambda: job.world.Bcast(_bytes_out(array), root=root))
    return array


def barrier(name: str = "") -> None:
    """Wait until every process has come here (``name`` must match on all of them)."""
    job = current("a barrier across processes")
    job.guard.check(f"barrier {name!r}", tuple(range(job.num_processes)))
