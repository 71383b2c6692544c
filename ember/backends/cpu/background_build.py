"""Shared libraries that the CPU backend builds for itself (the launcher, Ember's GEMM),
loaded from the compile cache, else built by a background thread whose compiler runs at
a low priority, so that a fresh machine's first compile neither waits for nor competes
much with them. Until one is ready its user goes on without it. A build unfinished at
exit is handed to a process of its own (``host_libraries``), so that it is done once per
host however short the scripts that start it."""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from ember.backends.cpu import toolchain
from ember.errors import BackendUnavailableError, CompileError

Loaded = TypeVar("Loaded")

EXIT_WAIT_S = 1.0
BUILD_NICE = 10


class BackgroundBuild(Generic[Loaded]):
    """One library's build in this process: not started, running, or done. ``find``
    returns the library's path if the compile cache holds it, ``build`` compiles it
    (returning the path), ``load`` makes what its users need of the path."""

    def __init__(self, name: str, find: Callable[[], Path | None], build: Callable[[], Path],
                 load: Callable[[Path], Loaded]) -> None:
        self.name = name
        self._find, self._build, self._load = find, build, load
        self.loaded: Loaded | None = None
        self._started = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Load the library from the compile cache, else build it in the background
        (a thread started where nothing is to build would only take the GIL from the
        first compiled call for a switch interval)."""
        with self._lock:
            if self._started:
                return
            self._started = True
            try:
                path = self._find()
            except (BackendUnavailableError, OSError):
                return
            if path is not None:
                self.loaded = self._load(path)
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
            atexit.register(self._finish)

    def wait(self) -> Loaded | None:
        """What ``load`` made, after waiting for the build; None when it failed."""
        self.start()
        if self._thread is not None:
            self._thread.join()
        return self.loaded

    def _run(self) -> None:
        low_priority()
        try:
            path = self._build()
        except (CompileError, BackendUnavailableError, OSError):
            return
        self.loaded = self._load(path)

    def _finish(self) -> None:
        """At exit: stop a running build's compiler, and hand the per-host libraries to
        a process that outlives this one (waiting here would hold a short script's exit
        for seconds: a build runs at a low priority). The stopped build fails and
        removes its temporary files. (Not where ``config.build_at_exit`` is off: the
        compile cache goes with this process.)"""
        from ember.config import config

        if self._thread.is_alive():
            toolchain.stop_compilers()
            self._thread.join(EXIT_WAIT_S)
            if config.build_at_exit:
                hand_off()


_handed_off = False


def hand_off() -> None:
    """Start ``python -m ember.backends.cpu.host_libraries`` for this process's compile
    cache and settings, detached (its own session, no terminal, nothing inherited), once
    per process."""
    global _handed_off
    if _handed_off:
        return
    _handed_off = True
    from ember.config import FLAGS, config
    from ember.child_process import environment
    from ember.runtime.compile_cache import default_cache

    env = environment()
    for name in ("blas", "cflags", "sanitize", "num_threads"):  # what the libraries' keys hold
        value = getattr(config, name)
        env[FLAGS[name].env_var] = "" if value is None else str(value)
    env[FLAGS["cache_dir"].env_var] = str(default_cache().directory)
    try:
        subprocess.Popen([sys.executable, "-m", "ember.backends.cpu.host_libraries"],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        pass  # the next process builds them in the background again


def low_priority() -> None:
    """Lower this thread's priority, and so that of the compiler it starts (on Linux a
    nice value belongs to a thread and a child process inherits it): nice 10 leaves the
    cores to the program's own threads (~10% share against each), yet finishes in about
    a second beside other busy processes, before a short script's exit gives up on it."""
    try:
        thread = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, thread) < BUILD_NICE:
            os.setpriority(os.PRIO_PROCESS, thread, BUILD_NICE)
    except (AttributeError, OSError):
        pass
