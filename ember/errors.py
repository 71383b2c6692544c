"""Ember's exception types.

Every error a user can meet derives from a built-in category (TypeError, ValueError,
IndexError, RuntimeError) so existing ``except`` clauses keep working, and from
``EmberError`` so callers can catch all of Ember's at once. Messages name the user's
source line where one is known and say how to fix the problem.
"""
from __future__ import annotations


class EmberError(Exception):
    """Base class of every error Ember raises on purpose."""


class EmberTypeError(EmberError, TypeError):
    """Wrong dtype, wrong kind of value, or a bad argument type."""


class EmberValueError(EmberError, ValueError):
    """Wrong shape, bad axis, bad option value."""


class EmberIndexError(EmberError, IndexError):
    """An index or axis out of range."""


class ConcretizationError(EmberTypeError):
    """Python needed a concrete value (an ``if``, ``int()``, ``bool()``) of a traced one."""


class TracerLeakError(EmberError, RuntimeError):
    """A traced value escaped the transformation that created it."""


class CompileError(EmberError, RuntimeError):
    """A native compiler rejected generated code (an Ember bug: please report it)."""


class BackendUnavailableError(EmberError, RuntimeError):
    """The requested backend or device is not present on this machine."""


class NaNError(EmberError, FloatingPointError):
    """debug_nans found a NaN."""


def with_location(message: str, source: object | None) -> str:
    """Append 'at file:line' to a message when the user's source location is known."""
    if source is None:
        return message
    return f"{message}\n  (at {source})"
