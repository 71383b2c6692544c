"""Device memory accounting: what ``Device.memory_stats()`` reports, as in JAX.

Each device runtime counts the allocations it makes and the ones that are freed (an
allocation is freed when its last reference goes: an array dropped by the user, or a
temporary that a program released after its last use).
"""
from __future__ import annotations

import threading


class MemoryStats:
    """Bytes held by one device's live allocations, and the most ever held at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # frees come from finalizers on any thread
        self.bytes_in_use = 0
        self.peak_bytes_in_use = 0
        self.num_allocs = 0
        self.largest_alloc_size = 0

    def allocated(self, nbytes: int) -> None:
        with self._lock:
            self.bytes_in_use += nbytes
            self.peak_bytes_in_use = max(self.peak_bytes_in_use, self.bytes_in_use)
            self.num_allocs += 1
            self.largest_alloc_size = max(self.largest_alloc_size, nbytes)

    def freed(self, nbytes: int) -> None:
        with self._lock:
            self.bytes_in_use -= nbytes

    def reset_peak(self) -> None:
        """Start a new peak from what is in use now (as ``torch.cuda.reset_peak_memory_stats``)."""
        with self._lock:
            self.peak_bytes_in_use = self.bytes_in_use

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {"bytes_in_use": self.bytes_in_use,
                    "peak_bytes_in_use": self.peak_bytes_in_use,
                    "num_allocs": self.num_allocs,
                    "largest_alloc_size": self.largest_alloc_size}
