"""Which launcher started this process: mpirun / mpiexec (Open MPI, MPICH) or Slurm.

Each sets variables naming the process's rank and the job's size before the program
starts, so they are read without starting MPI.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

__all__ = ["Launch", "detect_launch"]

# (launcher, rank variable, size variable), in the order they are trusted: mpirun's own
# variables before Slurm's (srun may start mpirun, whose processes see both).
_SOURCES = (
    ("Open MPI (mpirun)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("MPICH (mpiexec)", "PMI_RANK", "PMI_SIZE"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS"),
)


@dataclass(frozen=True)
class Launch:
    """What the launcher says about this process."""

    launcher: str
    process_id: int
    num_processes: int


def detect_launch(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The launch that started this process, or None for a process started by hand."""
    env = os.environ if environ is None else environ
    for launcher, rank, size in _SOURCES:
        if rank in env and size in env:
            try:
                return Launch(launcher, int(env[rank]), int(env[size]))
            except ValueError:
                continue
    return None
