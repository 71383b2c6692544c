"""Ember's exception types.

Every error a user can meet derives from a built-in category (TypeError, ValueError,
IndexError, RuntimeError) so existing ``except`` clauses keep working, and from
``EmberError`` so callers can catch all of Ember's at once. Messages name the user's
source line where one is known and say how to fix the problem.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable


class EmberError(Exception):
    """Base class of every error Ember raises on purpose."""


class EmberTypeError(EmberError, TypeError):
    """Wrong dtype, wrong kind of value, or a bad argument type."""


class EmberValueError(EmberError, ValueError):
    """Wrong shape, bad axis, bad option value."""


class EmberIndexError(EmberError, IndexError):
    """An index or axis out of range."""


class ShapeError(EmberValueError, TypeError):
    """Incompatible shapes: a ValueError as NumPy raises, and a TypeError as JAX does."""


class ConcretizationError(EmberTypeError):
    """Python needed a concrete value (an ``if``, ``int()``, ``bool()``) of a traced one."""


class TracerLeakError(EmberTypeError):
    """A traced value escaped the transformation that created it (a TypeError, as JAX's
    ``UnexpectedTracerError``)."""


class TracerArrayConversionError(EmberTypeError):
    """NumPy was handed a traced array (``np.asarray(x)`` inside ``jit``), as JAX's."""


# JAX's names for the same errors, so ``except jax.errors.X`` carries over.
ConcretizationTypeError = ConcretizationError
UnexpectedTracerError = TracerLeakError


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


def annotate(error: EmberError, source: object | None) -> EmberError:
    """Add the user's source location to an Ember error's message (once)."""
    if source is not None and error.args and "(at " not in str(error.args[0]):
        error.args = (with_location(error.args[0], source), *error.args[1:])
    return error


def user_errors(fn: Callable) -> Callable:
    """Wrap a public function so the Ember errors it raises name the caller's line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EmberError as error:
            from ember.core.source_info import user_frame

            annotate(error, user_frame())
            raise

    wrapper.__wrapped_for_errors__ = True  # type: ignore[attr-defined]
    return wrapper


def wrap_public_functions(namespace: dict[str, Any]) -> None:
    """Apply ``user_errors`` to every public plain function in a module namespace."""
    for name, value in list(namespace.items()):
        if (not name.startswith("_") and isinstance(value, types.FunctionType)
                and not getattr(value, "__wrapped_for_errors__", False)):
            namespace[name] = user_errors(value)
