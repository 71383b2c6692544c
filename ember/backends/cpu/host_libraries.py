"""What the CPU backend builds once per host (toolchain and compile cache), never per
program: the launcher, Ember's GEMM library, the measurement behind ``blas="auto"``, and
ember_gemm.h's wrapper for the BLAS chosen.

A process builds these in the background and goes on without them meanwhile
(``background_build``). A short script exits before they finish, so a build still
running at exit is handed to ``python -m ember.backends.cpu.host_libraries``, a process
of its own that outlives the script and builds them all at a low priority; the next
script finds them. ``prepare()`` builds them in the foreground (``ember bench`` does,
before timing a compile: JAX's runtime libraries come compiled too).
"""
from __future__ import annotations

import fcntl
import os

from ember.config import config

__all__ = ["missing", "prepare"]

LOCK_NAME = "host-libraries.lock"  # held by the process preparing a cache directory


def prepare() -> None:
    """Build every per-host library the current configuration links, in this order: the
    launcher, Ember's GEMM (where ``blas`` may choose it), then the wrapper for the BLAS
    ``blas`` chooses (for "auto", measured with Ember's GEMM among the candidates)."""
    from ember.backends.cpu import ember_gemm, launcher, toolchain

    if toolchain.find_toolchain() is None:
        return
    launcher.launcher()
    if config.blas in ("auto", "ember"):
        ember_gemm.library_path()
    toolchain.gemm_wrapper_path()


def missing() -> list[str]:
    """The per-host libraries the compile cache lacks (builds nothing; for "auto" the
    BLAS choice is measured first where Ember's GEMM is there and its rates are not)."""
    from ember.backends.cpu import ember_gemm, launcher, toolchain

    if toolchain.find_toolchain() is None:
        return []
    absent = [] if launcher.built_path() is not None else ["launcher"]
    if config.blas in ("auto", "ember") and ember_gemm.built_library_path() is None:
        return [*absent, "ember_gemm", "gemm_wrapper"]
    if toolchain.built_gemm_wrapper_path() is None:
        absent.append("gemm_wrapper")
    return absent


def _prepare_once_per_directory() -> None:
    """``prepare()``, unless another process is preparing the same cache directory."""
    from ember.runtime.compile_cache import default_cache

    os.nice(10)  # (the cores belong to the programs the user runs meanwhile)
    lock = os.open(default_cache().directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    try:
        prepare()
    finally:
        os.close(lock)


if __name__ == "__main__":
    _prepare_once_per_directory()
