"""The errors of ``ember.distributed``."""
from __future__ import annotations

from ember.errors import EmberError

__all__ = ["DistributedError", "PeerFailedError"]


class DistributedError(EmberError, RuntimeError):
    """A job of several processes cannot go on: a bad ``initialize``, a process that is
    gone or stuck, or processes that disagree about the collective they are at."""


class PeerFailedError(DistributedError):
    """Another process failed; ``origin`` is the rank whose failure started it."""

    def __init__(self, message: str, origin: int) -> None:
        super().__init__(message)
        self.origin = origin
