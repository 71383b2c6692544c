"""``checkify``: checks in jitted code that report at run time, as
``jax.experimental.checkify``.

``checkify.check(pred, msg, *fmt_args, **fmt_kwargs)`` records a scalar predicate;
``checkify.checkify(f, errors=...)`` returns ``g`` with ``g(*args) -> (error, f(*args))``,
where ``error`` is a pytree (so ``jit(checkify(f))`` works) and ``error.throw()`` raises
``JaxRuntimeError`` with the first failed check's message, formatted with its run-time
values. Under ``vmap(checkify(f))`` the message names the mapped index.

``errors`` is a set of error types, as JAX's: ``user_checks`` (the default: ``check``
calls), ``nan_checks`` (a primitive produced a NaN), ``div_checks`` (a division by
zero), ``index_checks`` (a gather, dynamic slice or scatter out of bounds),
``float_checks`` (NaN and division), ``automatic_checks`` and ``all_checks``. The
automatic checks stage ``f`` to a Graph and run it equation by equation, each checked
after it runs; their messages are JAX's, with the user's line appended.

Limits: a check must be traced by the function that ``checkify`` wraps, not inside a
transformation or control-flow body applied within it: write ``vmap(checkify(f))``, not
``checkify(vmap(f))``. Automatic checks look at the equations of ``f`` itself: a NaN
made inside a ``lax.scan`` / ``while_loop`` / ``cond`` body or an inner ``jit`` is
reported as made by that primitive (JAX names the primitive inside), and out-of-bounds
indices inside such bodies are not checked. When several checks fail, ``get()`` reports a
failed user check before any automatic one (JAX: the first in program order).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember.core.abstract import aval_of
from ember.core.pytree import PyTreeDef, register_pytree_node, tree_flatten, tree_unflatten
from ember.core.source_info import SourceInfo, source_override
from ember.core.staging import trace_to_graph
from ember.core.trace import Tracer, current_level
from ember.errors import EmberError, EmberValueError
from ember.experimental import _automatic_checks as automatic
from ember.experimental._automatic_checks import (DivisionByZeroError, Found, NaNError,
                                                  OOBError)
from ember.ir.graph import Graph, Literal

__all__ = ["DivisionByZeroError", "Error", "FailedCheckError", "JaxRuntimeError", "NaNError",
           "OOBError", "all_checks", "automatic_checks", "check", "checkify", "div_checks",
           "float_checks", "index_checks", "nan_checks", "user_checks"]


class JaxRuntimeError(EmberError, ValueError):
    """A failed check (JAX's name and kind of error)."""


class FailedCheckError:
    """The error type of ``check``: ``errors=`` sets hold such types, as in JAX."""


user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


@dataclass(frozen=True)
class _Check:
    """What a check records besides its arrays: the message, its values' structure, and
    for an automatic check the user's line (user checks end with JAX's suffix instead)."""

    msg: str
    fmt_tree: PyTreeDef
    automatic: bool = False
    source: SourceInfo | None = None

    def message(self, args: Any, kwargs: Any) -> str:
        text = self.msg.format(*args, **kwargs)
        if not self.automatic:
            return f"{text} (`check` failed)"
        return f"{text} (at {self.source})" if self.source is not None else text


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
            return f"{where}{entry.message(args, kwargs)}"
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
    unknown = set(errors) - all_checks
    if unknown:
        raise EmberValueError(f"checkify: unknown error types {sorted(map(str, unknown))}; "
                              f"errors= takes a set such as checkify.all_checks, "
                              f"checkify.float_checks or checkify.user_checks")
    enabled = frozenset(errors)

    @functools.wraps(f)
    def checked(*args: Any, **kwargs: Any) -> tuple[Error, Any]:
        if not enabled & automatic_checks:
            collector, out = _collect_user_checks(f, args, kwargs)
            return _error_of(collector, enabled), out
        return _checked_equation_by_equation(f, enabled, args, kwargs)

    return checked


def _collect_user_checks(f: Callable, args: tuple, kwargs: dict) -> tuple[_Collector, Any]:
    collector = _Collector()
    _collectors.append(collector)
    try:
        out = f(*args, **kwargs)
    finally:
        _collectors.pop()
    return collector, out


def _error_of(collector: _Collector, enabled: frozenset) -> Error:
    if FailedCheckError not in enabled:  # user checks not asked for: dropped, as in JAX
        return Error((), [], [])
    return Error(tuple(collector.checks), collector.failed, collector.payloads)


def _checked_equation_by_equation(f: Callable, enabled: frozenset, args: tuple,
                                  kwargs: dict) -> tuple[Error, Any]:
    """Stage ``f`` (its user checks become outputs), then run the Graph again with the
    automatic checks after each equation."""
    flat_args, in_tree = tree_flatten((args, kwargs))
    staged: dict[str, Any] = {}

    def flat_fun(*flat: Any) -> list[Any]:
        call_args, call_kwargs = tree_unflatten(in_tree, list(flat))
        collector, out = _collect_user_checks(f, call_args, call_kwargs)
        out_leaves, staged["out_tree"] = tree_flatten(out)
        staged["collector"], staged["n_out"] = collector, len(out_leaves)
        return [*out_leaves, *collector.failed, *(v for p in collector.payloads for v in p)]

    graph = trace_to_graph(flat_fun, [aval_of(a) for a in flat_args])
    values, found = _run_with_checks(graph, flat_args, enabled)
    collector: _Collector = staged["collector"]
    n_out, n_checks = staged["n_out"], len(collector.checks)
    out = tree_unflatten(staged["out_tree"], values[:n_out])
    user = _error_of(collector, enabled)
    failed, rest = list(values[n_out:n_out + n_checks]), iter(values[n_out + n_checks:])
    payloads = [[next(rest) for _ in p] for p in collector.payloads]
    if FailedCheckError not in enabled:
        failed, payloads = [], []
    checks = [*user._checks, *(_Check(x.msg, tree_flatten((tuple(x.payload), {}))[1], True,
                                      x.source) for x in found)]
    return Error(tuple(checks), [*failed, *(x.failed for x in found)],
                 [*payloads, *(list(x.payload) for x in found)]), out


def _run_with_checks(graph: Graph, args: list[Any], enabled: frozenset
                     ) -> tuple[list[Any], list[Found]]:
    """Evaluate ``graph`` binding each equation (so an outer jit or vmap stages or maps
    it), and the checks ``enabled`` asks for on each equation's operands and results."""
    env: dict[Any, Any] = dict(zip(graph.constvars, graph.constvals))
    env.update(zip(graph.inputs, args))
    found: list[Found] = []

    def read(atom: Any) -> Any:
        return atom.value if isinstance(atom, Literal) else env[atom]

    for eqn in graph.eqns:
        inputs = [read(a) for a in eqn.inputs]
        with source_override(eqn.source):
            outs = eqn.prim.bind(*inputs, **eqn.params)
            outs = list(outs) if eqn.prim.multiple_results else [outs]
            found += automatic.checks_of(eqn, inputs, outs, enabled)
        env.update(zip(eqn.outputs, outs))
    return [read(atom) for atom in graph.outputs], found
