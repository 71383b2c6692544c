"""Collectives among the device threads of one process, through shared memory.

In a per_device shard_map (``ember.sharding.device_threads``) every device of the mesh
is a thread of this process running the same compiled per-device program. At each
collective a thread deposits a copy of its buffer in its slot, meets the others at a
barrier, and reads its peers' slots in the global order of the mesh, so a sum folds the
same rows in the same order as the fused program and as the processes' path
(``ember.distributed.host_collectives``, which hands its collectives here when the
calling thread is a device thread).

Slots alternate between two sets, so one barrier per exchange is enough: a thread
writes a set again only two exchanges later, after every thread has passed the barrier
that follows its reads of it. A thread that fails aborts the barrier, so the others
raise instead of waiting; a barrier also breaks after ``timeout`` seconds.
"""
from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

__all__ = ["DeviceAborted", "DeviceCommunicator", "DeviceMember", "current_member"]

# A reduction over small buffers is done whole by every thread (one exchange); over
# larger ones each thread reduces a chunk of the elements, then the chunks are shared.
WHOLE_ELEMENTS = 1 << 14


class _Thread(threading.local):
    member: DeviceMember | None = None  # (a class default: read without a failed lookup)


_THREAD = _Thread()


class DeviceAborted(RuntimeError):
    """Raised in a device thread whose peers stopped coming to collectives (one of them
    failed, or the barrier timed out)."""


def current_member() -> DeviceMember | None:
    """The device the calling thread runs, inside a per_device shard_map (else None)."""
    return _THREAD.member


class DeviceCommunicator:
    """The shared slots and barrier of the ``len(coords)`` device threads of one run;
    ``coords[d]``: the position of device ``d`` in the mesh, whose axes are
    ``axis_names``."""

    def __init__(self, coords: Sequence[tuple[int, ...]], axis_names: Sequence[Any],
                 timeout: float) -> None:
        self.coords = list(coords)
        self._device_at = {c: d for d, c in enumerate(self.coords)}
        self._axis = {name: k for k, name in enumerate(axis_names)}
        self._barrier = threading.Barrier(len(self.coords), timeout=timeout)
        self._slots: list[list[Any]] = [[None] * len(self.coords) for _ in range(2)]
        self.timeout = timeout

    def abort(self) -> None:
        """Wake every thread waiting at (or coming to) a collective with DeviceAborted."""
        self._barrier.abort()

    @contextlib.contextmanager
    def member(self, device: int) -> Iterator[DeviceMember]:
        """The calling thread runs ``device`` inside the block."""
        member, outer = DeviceMember(self, device), current_member()
        _THREAD.member = member
        try:
            yield member
        finally:
            _THREAD.member = outer

    def _meet(self, device: int, step: int, value: Any) -> list[Any]:
        slots = self._slots[step & 1]
        slots[device] = value
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise DeviceAborted(
                f"device {device}: the other devices stopped coming to collectives (one "
                f"failed, or did not arrive within {self.timeout:g} s: "
                "ember.config.distributed_timeout)") from None
        return slots

    def _peers(self, device: int, ranks: Sequence[tuple[Any, int]]) -> list[int]:
        """The devices ``ranks`` names from ``device``: ``(axis, j)`` is the device at
        position j along mesh axis ``axis`` that shares ``device``'s other coordinates."""
        mine = self.coords[device]
        peers = []
        for axis, position in ranks:
            coord = list(mine)
            coord[self._axis[axis]] = position
            peers.append(self._device_at[tuple(coord)])
        return peers


class DeviceMember:
    """One device thread's side of a ``DeviceCommunicator``: the collectives of
    ``host_collectives`` with the peers named by ``ranks`` (see ``_peers``)."""

    def __init__(self, communicator: DeviceCommunicator, device: int) -> None:
        self.communicator = communicator
        self.device = device
        self._step = 0

    def _exchange(self, value: Any) -> list[Any]:
        """Every device's ``value`` of this exchange (a list indexed by device)."""
        step, self._step = self._step, self._step + 1
        return self.communicator._meet(self.device, step, value)

    def allgather(self, array: np.ndarray, ranks: Sequence[tuple[Any, int]]) -> np.ndarray:
        """The peers' ``array``s stacked in the order of ``ranks``."""
        peers = self.communicator._peers(self.device, ranks)
        slots = self._exchange(np.array(array, copy=True))
        return np.stack([slots[p] for p in peers])

    def alltoall(self, array: np.ndarray, ranks: Sequence[tuple[Any, int]]) -> np.ndarray:
        """Block j of ``array`` (axis 0 split in ``len(ranks)``) goes to peer j; block i of
        the result comes from peer i."""
        peers = self.communicator._peers(self.device, ranks)
        mine = peers.index(self.device)
        slots = self._exchange(np.array(array, copy=True))
        return np.concatenate([np.split(slots[p], len(peers))[mine] for p in peers])

    def reduce(self, stacked: np.ndarray, ranks: Sequence[tuple[Any, int]],
               reduce_rows: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``reduce_rows`` of every peer's contributions (``stacked``'s rows), the peers in
        the order of ``ranks``: each element always folds the same rows in the same
        order, whoever reduces it."""
        peers = self.communicator._peers(self.device, ranks)
        local, shape = stacked.shape[0], stacked.shape[1:]
        n = math.prod(shape)
        slots = self._exchange(np.array(stacked, copy=True).reshape(local, n))
        if n <= WHOLE_ELEMENTS or len(peers) == 1:
            return reduce_rows(np.concatenate([slots[p] for p in peers])).reshape(shape)
        chunk = -(-n // len(peers))
        start = peers.index(self.device) * chunk
        rows = np.concatenate([slots[p][:, start:start + chunk] for p in peers])
        parts = self._exchange(reduce_rows(rows))
        return np.concatenate([parts[p] for p in peers]).reshape(shape)
