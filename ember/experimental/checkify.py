"""``checkify``: checks in jitted code that report at run time, as
``jax.experimental.checkify``.

``checkify.check(pred, msg, *fmt_args, **fmt_kwargs)`` records a scalar predicate;
``checkify.checkify(f, errors=...)`` returns ``g`` with ``g(*args) -> (error, f(*args))``,
where ``error`` is a pytree (so ``jit(checkify(f))`` works) and ``error.throw()`` raises
``JaxRuntimeError`` with the first failed check's message, formatted with its run-time
values. Under ``vmap(checkify(f))`` the message names the mapped index.
``debug_check`` is a ``check`` that does nothing outside ``checkify``; ``check_error(err)``
raises ``err`` (inside ``checkify``: adds its checks to the enclosing function's);
``init_error`` is the Error of no failure.

``errors`` is a set of error types, as JAX's: ``user_checks`` (the default: ``check``
calls), ``nan_checks`` (a primitive produced a NaN), ``div_checks`` (a ``div`` by zero:
``/``, ``//`` and ``divmod``, integers or floats; not ``%``, as in JAX), ``index_checks``
(a gather, dynamic slice or scatter out of bounds), ``float_checks`` (NaN and
division), ``automatic_checks`` and ``all_checks``. The automatic checks' messages are
JAX's, with the user's line appended.

``checkify`` stages ``f`` to a Graph and runs it equation by equation, each checked after
it runs (``_functionalize``): checks inside ``lax.cond`` branches and ``scan`` /
``fori_loop`` / ``while_loop`` bodies, in an inner ``jit``, under ``vmap`` or ``grad``
inside ``f`` are checked where they run, and ``get()`` reports the first check that
failed, in the order the program ran them (as JAX); a ``while_loop``'s ``cond_fun`` is
checked too, a ``checkpoint`` body is run in line, and ``custom_jvp`` / ``custom_vjp``
functions are checked as they run (differentiated inside ``f``: their rules' checks).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ember.core.abstract import aval_of
from ember.core.pytree import register_pytree_node, tree_flatten, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.core.trace import Tracer
from ember.errors import EmberValueError
from ember.experimental._automatic_checks import DivisionByZeroError, NaNError, OOBError
from ember.experimental._functionalize import Checker, FailedCheckError
from ember.experimental._user_check import CheckSite, JaxRuntimeError, check_p, ignoring_checks

__all__ = ["DivisionByZeroError", "Error", "FailedCheckError", "JaxRuntimeError", "NaNError",
           "OOBError", "all_checks", "automatic_checks", "check", "check_error", "checkify",
           "debug_check", "div_checks", "float_checks", "index_checks", "init_error",
           "nan_checks", "user_checks"]

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


class Error:
    """The outcome of a checkified function: whether a check failed, which failed first,
    and the values of each check's message. ``get()`` is the first failure's message
    (None: all passed)."""

    def __init__(self, checks: tuple[CheckSite, ...], err: Any, code: Any,
                 slots: list[list[Any]]) -> None:
        self._checks = checks
        self._err = err
        self._code = code
        self._slots = slots

    def get(self) -> str | None:
        err = np.asarray(self._err)
        if not err.any():
            return None
        index = tuple(int(i) for i in np.argwhere(err)[0])
        code = int(np.asarray(self._code)[index])
        values = [np.asarray(v)[index] for v in self._slots[code]]
        where = f"at mapped index {', '.join(map(str, index))}: " if index else ""
        return f"{where}{self._checks[code].message(values)}"

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
    lambda e: ((e._err, e._code, e._slots), e._checks),
    lambda checks, children: Error(checks, *children),
)

init_error = Error((), np.asarray(False), np.asarray(np.int32(0)), [])  # (no check failed)

_tracing_checkified = [0]  # how many checkify traces are open (checks stage inside them)


def check(pred: Any, msg: str, *fmt_args: Any, debug: bool = False, **fmt_kwargs: Any) -> None:
    """Record that scalar ``pred`` must hold; ``msg.format(*fmt_args, **fmt_kwargs)`` (with
    run-time values) is the error if it does not. Outside ``checkify`` a concrete failed
    check raises now; a traced one is an error (``debug=True``: ignored), as in JAX."""
    import ember.numpy as jnp

    if ignoring_checks():
        return
    if np.shape(pred) != ():
        raise TypeError(f"check takes a scalar pred as argument, got one of shape "
                        f"{np.shape(pred)}; reduce it first (e.g. jnp.all(x > 0))")
    fmt_leaves, fmt_tree = tree_flatten((fmt_args, fmt_kwargs))
    site = CheckSite(msg, fmt_tree)
    if not _tracing_checkified[0]:
        if any(isinstance(v, Tracer) for v in [pred, *fmt_leaves]):
            if debug:
                return
            raise EmberValueError(
                "checkify.check on a traced value outside checkify: a check cannot be "
                "staged (jit, scan, vmap...) without being functionalized. Wrap the "
                "function: err, out = ember.jit(checkify.checkify(f))(...); err.throw()")
        if not bool(np.asarray(pred)):
            raise JaxRuntimeError(site.message([np.asarray(v) for v in fmt_leaves]))
        return
    check_p.bind(jnp.asarray(pred, dtype=bool), *(jnp.asarray(v) for v in fmt_leaves),
                 site=site)


def debug_check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """``check`` inside ``checkify``; anywhere else nothing (as JAX's)."""
    if _tracing_checkified[0]:
        check(pred, msg, *fmt_args, **fmt_kwargs)


def check_error(error: Error) -> None:
    """Raise ``error``'s failure (``error.throw()``), as JAX's: inside ``checkify`` its
    checks join the enclosing function's (so ``checkify(f)`` may call it on the error of
    another checkified function, also under ``jit``); outside, a traced ``error`` cannot
    be raised (the same error as ``check``'s)."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes a checkify.Error, got {type(error).__name__}")
    import ember.numpy as jnp

    values = [error._err, error._code, *(v for slot in error._slots for v in slot)]
    if not _tracing_checkified[0]:
        if any(isinstance(v, Tracer) for v in values):
            raise EmberValueError(
                "checkify.check_error on a traced Error outside checkify: it cannot be "
                "staged without being functionalized; call it inside checkify(f), or "
                "call error.throw() on the Error a jitted function returned")
        error.throw()
        return
    err, code = jnp.asarray(error._err), jnp.asarray(error._code)
    if err.ndim:  # an Error mapped by vmap: its last failing element, as JAX picks
        batch = err.ndim
        err, code = jnp.ravel(err), jnp.ravel(code)
        last = err.shape[0] - 1 - jnp.argmax(jnp.flip(err, 0))
        err, code = err[last], code[last]
        slots = [[jnp.reshape(jnp.asarray(v), (-1, *np.shape(v)[batch:]))[last] for v in slot]
                 for slot in error._slots]
    else:
        slots = error._slots
    for number, (site, slot) in enumerate(zip(error._checks, slots)):
        failed = jnp.logical_and(err, jnp.equal(code, number))
        check_p.bind(jnp.logical_not(failed), *(jnp.asarray(v) for v in slot), site=site)


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
        flat_args, in_tree = tree_flatten((args, kwargs))
        out_tree: list = []

        def flat_fun(*flat: Any) -> list[Any]:
            call_args, call_kwargs = tree_unflatten(in_tree, list(flat))
            _tracing_checkified[0] += 1
            try:
                out = f(*call_args, **call_kwargs)
            finally:
                _tracing_checkified[0] -= 1
            leaves, tree = tree_flatten(out)
            out_tree.append(tree)
            return leaves

        graph = trace_to_graph(flat_fun, [aval_of(a) for a in flat_args])
        checker = Checker(enabled)
        outs, state = checker.run(graph, flat_args)
        slots = [state.slots[code] for code in range(len(checker.sites))]
        error = Error(tuple(checker.sites), state.err, state.code, slots)
        return error, tree_unflatten(out_tree[0], outs)

    return checked
