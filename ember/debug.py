"""``ember.debug``: print, call back, or stop at run time, also inside ``jit`` (as
``jax.debug``).

Each is a debug callback (``ember/ops/callbacks.py``): it sees the values when the
program runs (at every run of a compiled program, not once when it is traced), once
per element under ``vmap``, the primal values under ``grad``, every iteration inside
``lax.fori_loop`` / ``scan`` / ``while_loop``, and only the branch taken in ``lax.cond``.
Callbacks with no data between them run in the order the compiled schedule puts them
(``ordered`` is accepted for JAX's signature).
"""
from __future__ import annotations

import builtins
import pdb
import re
import string
import sys
from typing import Any, Callable

import numpy as np

from ember.core.trace import Tracer
from ember.ops.callbacks import debug_callback
from ember.runtime.array import Array
from ember.sharding.visualize import visualize_array_sharding

__all__ = ["breakpoint", "callback", "print", "visualize_array_sharding"]


def callback(callback: Callable[..., Any], *args: Any, ordered: bool = False,
             partitioned: bool = False, **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` with the arrays' values (NumPy arrays) when the
    program runs. Its result is ignored; it cannot change the program's results."""
    if not callable(callback):
        raise TypeError(f"ember.debug.callback expects a function, got "
                        f"{type(callback).__name__}")
    debug_callback(callback, *args, **kwargs)


def print(fmt: str, *args: Any, ordered: bool = False, partitioned: bool = False,
          **kwargs: Any) -> None:
    """Print ``fmt.format(*args, **kwargs)`` with the arrays' values when the program runs,
    as ``jax.debug.print``: ``ember.debug.print("x = {x}, y = {}", y, x=x)``."""
    if not isinstance(fmt, str):
        raise TypeError(f"ember.debug.print takes a format string first, got "
                        f"{type(fmt).__name__}")
    _check_format(fmt, args, kwargs)
    debug_callback(_Formatted(fmt), *args, **kwargs)


class _Formatted:
    """Prints one format string; equal for equal strings (retraces hit the caches)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        builtins.print(self.fmt.format(*args, **kwargs))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Formatted) and other.fmt == self.fmt

    def __hash__(self) -> int:
        return hash(self.fmt)

    def __repr__(self) -> str:
        return f"print({self.fmt!r})"


def _check_format(fmt: str, args: tuple, kwargs: dict) -> None:
    """Fail where the user calls, not later inside a compiled program's run: every field
    of ``fmt`` must name a given value."""
    automatic = 0
    for _, field, _, _ in string.Formatter().parse(fmt):
        if field is None:
            continue
        base = re.split(r"[.\[]", field, maxsplit=1)[0]
        if base == "":
            automatic += 1
            missing, error = automatic > len(args), IndexError
        elif base.isdigit():
            missing, error = int(base) >= len(args), IndexError
        else:
            missing, error = base not in kwargs, KeyError
        if missing:  # the error Python's str.format raises, as JAX does
            raise error(f"ember.debug.print: the format string {fmt!r} has a field "
                        f"{{{field}}} with no value; pass every {{}} a positional "
                        "argument and every {name} a keyword argument")


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,
               num_frames: int | None = None, ordered: bool = False, token: Any = None,
               **kwargs: Any) -> None:
    """Stop when the program runs here, with the caller's arrays (their run-time values)
    and other local values in scope, as ``jax.debug.breakpoint``. The stop is
    ``breakpoint_hook(where, values)``: by default a pdb prompt where each local is a
    name, when standard input is a terminal; elsewhere (tests, batch jobs) a note is
    printed and the program goes on."""
    frame = sys._getframe(1)
    where = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
    arrays = {name: value for name, value in frame.f_locals.items() if _is_array(value)}
    others = {name: value for name, value in frame.f_locals.items() if name not in arrays}
    del frame
    names = tuple(arrays)

    def stop(*values: Any) -> None:
        breakpoint_hook(where, {**others, **dict(zip(names, values))})

    debug_callback(stop, *arrays.values())


def _is_array(value: Any) -> bool:
    return isinstance(value, (Array, Tracer, np.ndarray))


def _pdb_prompt(where: str, values: dict[str, Any]) -> None:
    if not sys.stdin or not sys.stdin.isatty():
        builtins.print(f"ember.debug.breakpoint at {where}: no terminal to stop at; values: "
                       f"{', '.join(sorted(values))}")
        return
    builtins.print(f"ember.debug.breakpoint at {where}; 'c' continues the program")
    pdb.Pdb().run("pass", {}, dict(values))


# What a breakpoint does when reached (tests and tools may replace it).
breakpoint_hook: Callable[[str, dict[str, Any]], None] = _pdb_prompt
