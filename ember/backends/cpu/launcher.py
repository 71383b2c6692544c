"""The launcher: one small C function (``launcher.c``) that reads the data pointers of
a list of NumPy arrays and calls a module's entry point, releasing the GIL meanwhile.

It is built once per machine (through the compile cache): compiling against the Python
and NumPy headers costs about as much as a compiled program, so it must not delay (or
compete with) the first compile of a fresh machine. When the compile cache lacks it,
the CPU backend starts building it after its first compile (``start_launcher``), in a
background thread, by a compiler at a low priority. Until it is ready, and where it
cannot be built (no Python or NumPy headers), executables pass pointers gathered in
Python instead.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ember.backends.cpu import toolchain
from ember.errors import BackendUnavailableError, CompileError

_SOURCE = Path(__file__).with_name("launcher.c")

Launch = Callable[[int, list, int], int]
_EXIT_WAIT_S = 1.0
LAUNCHER_NICE = 10


class Loops:
    """The launcher library's native loops (``ember_scan``, ``ember_while``), called
    without the GIL."""

    def __init__(self, path: Path) -> None:
        library = ctypes.CDLL(str(path))
        self.scan, self.while_ = library.ember_scan, library.ember_while
        pointer, count = ctypes.c_void_p, ctypes.c_int64
        self.scan.argtypes = [pointer, pointer, count, count, count, count, pointer, pointer,
                              pointer, count, count, count, pointer, pointer, count, pointer,
                              pointer, pointer]
        self.while_.argtypes = [pointer, pointer, count, count, pointer, pointer, count, count,
                                pointer, pointer, pointer, count, pointer]
        for function in (self.scan, self.while_):
            function.restype = count


class _Build:
    """The launcher's one build per process: not started, running, or done."""

    def __init__(self) -> None:
        self.function: Launch | None = None
        self.loops: Loops | None = None
        self._started = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Load the launcher from the compile cache, else build it in the background
        (a thread started where nothing is to build would only take the GIL from the
        first compiled call for a switch interval)."""
        with self._lock:
            if self._started:
                return
            self._started = True
            try:
                path = toolchain.find_shared_library(_SOURCE.read_text(), **_build_options())
            except (BackendUnavailableError, OSError):
                return
            if path is not None:
                self.function, self.loops = _load(path), Loops(path)
                return
            self._thread = threading.Thread(target=self._run, name="ember-launcher",
                                            daemon=True)
            self._thread.start()
            atexit.register(self._finish)

    def _finish(self) -> None:
        """At exit: give a running build a moment to end, then stop its compiler (a
        compiler left running would leave temporary files behind; a build at a low
        priority on a busy machine could otherwise hold the exit for seconds)."""
        self._thread.join(_EXIT_WAIT_S)
        if self._thread.is_alive():
            toolchain.stop_compilers()
            self._thread.join(_EXIT_WAIT_S)

    def wait(self) -> Launch | None:
        self.start()
        if self._thread is not None:
            self._thread.join()
        return self.function

    def _run(self) -> None:
        _low_priority()
        try:
            path = toolchain.compile_shared_library(_SOURCE.read_text(), **_build_options())
        except (CompileError, BackendUnavailableError, OSError):
            return
        self.function, self.loops = _load(path), Loops(path)


def _build_options() -> dict:
    return {"name": "ember_launcher",
            "extra_flags": (f"-I{_python_include()}", f"-I{np.get_include()}")}


def _load(path: Path) -> Launch:
    function = ctypes.PyDLL(str(path)).ember_launch
    function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


def _python_include() -> str:
    """The folder of ``Python.h``: where CPython's standard layout puts it, else where
    ``sysconfig`` says (its first use imports the build's configuration, ~4 ms holding
    the GIL while the first compiled call is on its way)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    standard = os.path.join(sys.base_prefix, "include", version)
    if os.path.isfile(os.path.join(standard, "Python.h")):
        return standard
    return sysconfig.get_paths()["include"]


def _low_priority() -> None:
    """Lower this thread's priority, and so that of the compiler it starts (on Linux a
    nice value belongs to a thread and a child process inherits it): nice 10 leaves the
    cores to the program's own threads (~10% share against each), yet finishes in about
    a second beside other busy processes, before a short script's exit gives up on it."""
    try:
        thread = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, thread) < LAUNCHER_NICE:
            os.setpriority(os.PRIO_PROCESS, thread, LAUNCHER_NICE)
    except (AttributeError, OSError):
        pass


_build = _Build()


def start_launcher() -> None:
    """Load the launcher, or start building it in the background; once per process."""
    _build.start()


def ready_launcher() -> Launch | None:
    """``launch(entry_address, arrays, segment)`` if it is built and loaded, else None
    (still building, or it cannot be built). Never waits."""
    return _build.function


def ready_loops() -> Loops | None:
    """The native loops, if the launcher is built and loaded, else None. Never waits."""
    return _build.loops


def launcher() -> Launch | None:
    """The launcher, waiting for its build; None when it cannot be built."""
    return _build.wait()
