"""Each process of ``ember launch`` leaves its exit status in the launch's folder, so
the launcher can return the first non-zero one (mpirun itself does not say)."""
from __future__ import annotations

import os
import time

__all__ = ["read_statuses", "record_exit"]

_VARIABLE = "EMBER_LAUNCH_DIR"


def record_exit(code: int) -> None:
    """Write this process's exit status (once) where ``ember launch`` reads it."""
    folder = os.environ.get(_VARIABLE)
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK"))
    if not folder or rank is None:
        return
    path = os.path.join(folder, f"rank-{rank}")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as out:
            out.write(f"{int(code)} {time.time_ns()}\n")
        os.replace(path + ".tmp", path)


def read_statuses(folder: str, count: int) -> dict[int, tuple[int, int] | None]:
    """rank -> (exit status, time it was written in ns), or None for a process that
    left none (it was killed)."""
    found: dict[int, tuple[int, int] | None] = {}
    for rank in range(count):
        try:
            with open(os.path.join(folder, f"rank-{rank}")) as record:
                code, when = record.read().split()
            found[rank] = (int(code), int(when))
        except (OSError, ValueError):
            found[rank] = None
    return found
