"""Threads kept for per_device shard_maps: the caller runs device 0 and one kept worker
thread runs each other device, so a step starts no thread (starting one waits for it to
be scheduled, which on a loaded host costs more than a small step)."""
from __future__ import annotations

import queue
import threading
from typing import Callable

__all__ = ["run_on_threads"]


class _Worker:
    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.jobs.get()()


_WORKERS: list[_Worker] = []
_BUSY = threading.Lock()  # the kept workers serve one run at a time


def run_on_threads(count: int, work: Callable[[int], None]) -> None:
    """``work(0)`` here and ``work(d)`` for d = 1 ... count-1 on threads of their own,
    all at once; returns when every one has returned (``work`` must not raise)."""
    if not _BUSY.acquire(blocking=False):  # a run inside a run: threads of its own
        threads = [threading.Thread(target=work, args=(d,), daemon=True,
                                    name=f"ember device thread {d}") for d in range(1, count)]
        for thread in threads:
            thread.start()
        work(0)
        for thread in threads:
            thread.join()
        return
    try:
        done = threading.Semaphore(0)

        def job(d: int) -> Callable[[], None]:
            def run() -> None:
                try:
                    work(d)
                finally:
                    done.release()
            return run

        for d, worker in zip(range(1, count), _workers(count - 1)):
            worker.jobs.put(job(d))
        work(0)
        for _ in range(count - 1):
            done.acquire()
    finally:
        _BUSY.release()


def _workers(count: int) -> list[_Worker]:
    while len(_WORKERS) < count:
        _WORKERS.append(_Worker(f"ember device thread {len(_WORKERS) + 1}"))
    return _WORKERS[:count]
