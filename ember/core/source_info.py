"""The user's source location of an operation: the first stack frame outside Ember."""
from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP_PREFIXES = (_EMBER_DIR,)
_SKIP_FILES = ("<frozen", "contextlib.py", "functools.py")


@dataclass(frozen=True)
class SourceInfo:
    file: str
    line: int
    function: str
    scope: str = ""  # the active ``named_scope`` names, outermost first: "block/attention"

    def __str__(self) -> str:
        where = f"{self.function}, in {self.scope}" if self.scope else self.function
        return f"{self.file}:{self.line} ({where})"

    def short(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"


@functools.lru_cache(maxsize=4096)  # (asked for every frame of every traced operation)
def _is_internal(filename: str) -> bool:
    return filename.startswith(_SKIP_PREFIXES) or any(s in filename for s in _SKIP_FILES)


_overrides: list[SourceInfo | None] = []


@contextlib.contextmanager
def source_override(source: SourceInfo | None):
    """Attribute operations bound meanwhile to ``source`` (e.g. the forward equation a
    backward-pass operation derives from), instead of the caller's frame."""
    _overrides.append(source)
    try:
        yield
    finally:
        _overrides.pop()


_scopes: list[str] = []


@contextlib.contextmanager
def named_scope(name: str):
    """Name the operations traced meanwhile (as ``jax.named_scope``): the names nest, and
    show in the source location of each equation and in error messages."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope takes a string, got {type(name).__name__}")
    _scopes.append(name)
    try:
        yield
    finally:
        _scopes.pop()


def user_frame(skip: int = 1) -> SourceInfo | None:
    """Where the user's code called into Ember (None if the whole stack is internal)."""
    if _overrides and _overrides[-1] is not None:
        return _overrides[-1]
    frame = sys._getframe(skip)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal(filename):
            return SourceInfo(filename, frame.f_lineno, frame.f_code.co_name, "/".join(_scopes))
        frame = frame.f_back
    return None
