"""Differential fuzzing of the compiler: random programs over the primitive set, run on
every backend (eager and jitted), with grad and vmap, against the reference.

``ember fuzz --minutes N [--seed S] [--backend B] [--out DIR]`` runs a campaign and
writes each failure as a shrunk, standalone reproducer.
"""
from __future__ import annotations

from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ember fuzz`` (see ``ember.fuzz.command``)."""
    from ember.fuzz.command import main as run

    return run(argv)
