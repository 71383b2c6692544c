"""Recycled host memory for large results.

A fresh large NumPy array is fresh memory from the OS: the first write to each 4 KiB
page faults and the kernel zeroes it, which for a 64 MiB result costs more than the
fused kernel that fills it. The pool lends such arrays out of memory it keeps, and takes
the memory back when the last view of a result is gone (a weakref on the lent array,
which every view keeps alive: NumPy stops collapsing view chains at an array whose base
is not an array, here the pool's ``bytearray``).
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

MIN_BYTES = 1 << 20  # smaller arrays come from malloc, which recycles them well
MAX_CACHED_BYTES = 1 << 30
_ALIGNMENT = 64


class BufferPool:
    def __init__(self, max_cached_bytes: int = MAX_CACHED_BYTES) -> None:
        self._free: dict[int, list[bytearray]] = {}
        self._cached = 0
        self._max = max_cached_bytes
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> np.ndarray:
        """An uninitialized array of ``nbytes``, from recycled memory when it is large."""
        if nbytes < MIN_BYTES:
            return np.empty(shape, dtype)
        raw = self._take(nbytes)
        offset = -_address(raw) % _ALIGNMENT
        lent = np.frombuffer(raw, np.uint8, count=nbytes, offset=offset)
        weakref.finalize(lent, self._give_back, raw, nbytes).atexit = False
        return lent.view(dtype).reshape(shape)

    def _take(self, nbytes: int) -> bytearray:
        with self._lock:
            free = self._free.get(nbytes)
            if free:
                self._cached -= nbytes
                return free.pop()
        return bytearray(nbytes + _ALIGNMENT)

    def _give_back(self, raw: bytearray, nbytes: int) -> None:
        with self._lock:
            if self._cached + nbytes <= self._max:
                self._free.setdefault(nbytes, []).append(raw)
                self._cached += nbytes


def _address(raw: bytearray) -> int:
    return np.frombuffer(raw, np.uint8, count=1).ctypes.data


POOL = BufferPool()
