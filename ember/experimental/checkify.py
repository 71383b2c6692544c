"""``checkify``: checks in jitted code that report at run time, as
``jax.experimental.checkify`` (its user checks).

``checkify.check(pred, msg, *fmt_args, **fmt_kwargs)`` records a scalar predicate;
``checkify.checkify(f)`` returns ``g`` with ``g(*args) -> (error, f(*args))``, where
``error`` is a pytree (so ``jit(checkify(f))`` works) and ``error.throw()`` raises
``JaxRuntimeError`` with the first failed check's message, formatted with its run-time
values. Under ``vmap(checkify(f))`` the message names the mapped index.

The subset: user checks (``errors=user_checks``, the default). A check must be traced
by the function that ``checkify`` wraps, not inside a transformation or control-flow body
applied within it: write ``vmap(checkify(f))``, not ``checkify(vmap(f))``; NaNs are
found by ``ember.config.update("jax_debug_nans", True)``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember.core.pytree import PyTreeDef, register_pytree_node, tree_flatten, tree_unflatten
from ember.core.trace import Tracer, current_level
from ember.errors import EmberError, EmberValueError

__all__ = ["Error", "FailedCheckError", "JaxRuntimeError", "all_checks", "check", "checkify",
           "user_checks"]


class JaxRuntimeError(EmberError, ValueError):
    """A failed check (JAX's name and kind of error)."""


class FailedCheckError:
    """The error type of ``check``: ``errors=`` sets hold such types, as in JAX."""


class NaNError:
    """JAX's NaN check type; accepted in ``all_checks`` but not found by checkify here."""


user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
all_checks = user_checks | nan_checks


@dataclass(frozen=True)
class _Check:
    """What a check records besides its arrays: the message and its values' structure."""

    msg: str
    fmt_tree: PyTreeDef


class Error:
    """The outcome of a checkified function: one failure flag per check, the values of its
    message. ``get()`` is the first failure's message (None: all passed)."""

    def __init__(self, checks: tuple[_Check, ...], failed: list[Any], payloads: list[list[Any]]):
        self._checks = checks
        self._failed = failed
        self._payloads = payloads

    def get(self) -> str | None:
        for entry, failed, payload in zip(self._checks, self._failed, self._payloads):
            failed = np.asarray(failed)
            if not failed.any():
                continue
            index = tuple(int(i) for i in np.argwhere(failed)[0])
            values = [np.asarray(p)[index] for p in payload]
            args, kwargs = tree_unflatten(entry.fmt_tree, values)
            where = f"at mapped index {', '.join(map(str, index))}: " if index else ""
            return f"{where}{entry.msg.format(*args, **kwargs)} (`check` failed)"
        return None

    def get_exception(self) -> JaxRuntimeError | None:
        message = self.get()
        return None if message is None else JaxRuntimeError(message)

    def throw(self) -> None:
        error = self.get_exception()
        if error is not None:
            raise error

    def __repr__(self) -> str:
        return f"Error({self.get()!r})"


register_pytree_node(
    Error,
    lambda e: ((e._failed, e._payloads), e._checks),
    lambda checks, children: Error(checks, *children),
)


class _Collector:
    def __init__(self) -> None:
        self.level = current_level()
        self.checks: list[_Check] = []
        self.failed: list[Any] = []
        self.payloads: list[list[Any]] = []


_collectors: list[_Collector] = []


def check(pred: Any, msg: str, *fmt_args: Any, debug: bool = False, **fmt_kwargs: Any) -> None:
    """Record that scalar ``pred`` must hold; ``msg.format(*fmt_args, **fmt_kwargs)`` (with
    run-time values) is the error if it does not. Outside ``checkify`` a concrete failed
    check raises now; a traced one is an error (``debug=True``: ignored), as in JAX."""
    import ember.numpy as jnp

    if np.shape(pred) != ():
        raise TypeError(f"check takes a scalar pred as argument, got one of shape "
                        f"{np.shape(pred)}; reduce it first (e.g. jnp.all(x > 0))")
    fmt_leaves, fmt_tree = tree_flatten((fmt_args, fmt_kwargs))
    traced = [v for v in [pred, *fmt_leaves] if isinstance(v, Tracer)]
    if not _collectors:
        if traced:
            if debug:
                return
            raise EmberValueError(
                "checkify.check on a traced value outside checkify: a check cannot be "
                "staged (jit, scan, vmap...) without being functionalized. Wrap the "
                "function: err, out = ember.jit(checkify.checkify(f))(...); err.throw()")
        if not bool(np.asarray(pred)):
            args, kwargs = tree_unflatten(fmt_tree, [np.asarray(v) for v in fmt_leaves])
            raise JaxRuntimeError(f"{msg.format(*args, **kwargs)} (`check` failed)")
        return
    collector = _collectors[-1]
    if any(t._trace.main.level > collector.level for t in traced):
        raise EmberValueError(
            "checkify.check inside a transformation or control-flow body applied within "
            "checkify (vmap, grad, lax.cond / scan / while_loop, an inner jit): Ember's "
            "checkify sees checks of the function it wraps only. Apply checkify inside "
            "instead: vmap(checkify(f)), jit(checkify(f)).")
    collector.checks.append(_Check(msg, fmt_tree))
    collector.failed.append(jnp.logical_not(jnp.asarray(pred, dtype=bool)))
    collector.payloads.append([jnp.asarray(v) for v in fmt_leaves])


def checkify(f: Callable, errors: frozenset = user_checks) -> Callable[..., tuple[Error, Any]]:
    """``f`` returning ``(error, out)``: its checks as values (see the module docstring)."""
    if set(errors) - user_checks:
        raise EmberValueError("checkify: Ember checks user checks only (errors=user_checks); "
                              "find NaNs with ember.config.update('jax_debug_nans', True)")

    @functools.wraps(f)
    def checked(*args: Any, **kwargs: Any) -> tuple[Error, Any]:
        collector = _Collector()
        _collectors.append(collector)
        try:
            out = f(*args, **kwargs)
        finally:
            _collectors.pop()
        return Error(tuple(collector.checks), collector.failed, collector.payloads), out

    return checked
