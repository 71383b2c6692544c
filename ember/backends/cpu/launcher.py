"""The launcher: one small C function (``launcher.c``) that reads the data pointers of
a list of NumPy arrays and calls a module's entry point, releasing the GIL meanwhile.
It is a builtin function (made once through ctypes), called as cheaply as any.

It is built once per machine (through the compile cache): compiling against the Python
and NumPy headers costs about as much as a compiled program, so it must not delay (or
compete with) the first compile of a fresh machine. When the compile cache lacks it,
the CPU backend starts building it after its first compile (``start_launcher``), in a
background thread, by a compiler at a low priority. Until it is ready, and where it
cannot be built (no Python or NumPy headers), executables pass pointers gathered in
Python instead.
"""
from __future__ import annotations

import ctypes
import os
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ember.backends.cpu import toolchain
from ember.backends.cpu.background_build import BackgroundBuild

_SOURCE = Path(__file__).with_name("launcher.c")

# launch(entry_address, arrays, segment): False (nothing run) when an item of arrays is
# neither None, an int (an address) nor a C-contiguous NumPy array.
Launch = Callable[[int, list, int], bool]


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


def _new_build() -> BackgroundBuild[tuple[Launch, Loops]]:
    """The launcher's build (one per process): the entry point and the native loops."""
    return BackgroundBuild(
        "ember-launcher",
        find=built_path,
        build=lambda: toolchain.compile_shared_library(_SOURCE.read_text(),
                                                       **_build_options()),
        load=lambda path: (_load(path), Loops(path)))


def built_path() -> Path | None:
    """The launcher library, if the compile cache holds it (nothing is built)."""
    return toolchain.find_shared_library(_SOURCE.read_text(), **_build_options())


def _build_options() -> dict:
    return {"name": "ember_launcher",
            "extra_flags": (f"-I{_python_include()}", f"-I{np.get_include()}")}


def _load(path: Path) -> Launch:
    make = ctypes.PyDLL(str(path)).ember_launch_function
    make.argtypes = [ctypes.py_object]
    make.restype = ctypes.py_object
    return make(np.ndarray)


def _python_include() -> str:
    """The folder of ``Python.h``: where CPython's standard layout puts it, else where
    ``sysconfig`` says (its first use imports the build's configuration, ~4 ms holding
    the GIL while the first compiled call is on its way)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    standard = os.path.join(sys.base_prefix, "include", version)
    if os.path.isfile(os.path.join(standard, "Python.h")):
        return standard
    return sysconfig.get_paths()["include"]


_build = _new_build()


def start_launcher() -> None:
    """Load the launcher, or start building it in the background; once per process."""
    _build.start()


def ready_launcher() -> Launch | None:
    """``launch(entry_address, arrays, segment)`` if it is built and loaded, else None
    (still building, or it cannot be built). Never waits."""
    return _build.loaded[0] if _build.loaded is not None else None


def ready_loops() -> Loops | None:
    """The native loops, if the launcher is built and loaded, else None. Never waits."""
    return _build.loaded[1] if _build.loaded is not None else None


def launcher() -> Launch | None:
    """The launcher, waiting for its build; None when it cannot be built."""
    loaded = _build.wait()
    return loaded[0] if loaded is not None else None
