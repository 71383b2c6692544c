"""The job this process belongs to: its rank, the others, the communicators."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Job", "current", "is_initialized", "process_count", "process_index"]


@dataclass
class Job:
    """One process's view of a job started by ``ember.distributed.initialize``."""

    process_id: int
    num_processes: int
    local_device_count: int
    launcher: str
    world: Any  # MPI intracommunicator, ranks ordered by process id
    guard: Any  # ember.distributed.guard.Guard
    groups: dict = field(default_factory=dict)  # process ranks -> their communicator

    def communicator(self, ranks: tuple[int, ...]) -> Any:
        """The communicator of the processes ``ranks`` (in that order), made once."""
        if ranks == tuple(range(self.num_processes)):
            return self.world
        if ranks not in self.groups:
            group = self.world.Get_group().Incl(list(ranks))
            self.groups[ranks] = self.world.Create_group(group)
        return self.groups[ranks]


_JOB: list[Job | None] = [None]


def current(what: str = "this") -> Job:
    job = _JOB[0]
    if job is None:
        raise _not_initialized(what)
    return job


def _not_initialized(what: str) -> Exception:
    from ember.distributed.errors import DistributedError

    return DistributedError(f"{what} needs ember.distributed.initialize() first (run the "
                            "script with `ember launch -n N script.py`)")


def is_initialized() -> bool:
    return _JOB[0] is not None


def process_index() -> int:
    """This process's index in the job (0 without ember.distributed), as
    ``jax.process_index``."""
    job = _JOB[0]
    return 0 if job is None else job.process_id


def process_count() -> int:
    """The number of processes in the job (1 without ember.distributed)."""
    job = _JOB[0]
    return 1 if job is None else job.num_processes
