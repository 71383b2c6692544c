"""The launcher: one small C function (``launcher.c``) that reads the data pointers of
a list of NumPy arrays and calls a module's entry point, releasing the GIL meanwhile.
Built once per machine (through the compile cache); without Python or NumPy headers
the executable falls back to passing pointers gathered in Python."""
from __future__ import annotations

import ctypes
import functools
import sysconfig
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ember.backends.cpu import toolchain
from ember.errors import CompileError

_SOURCE = Path(__file__).with_name("launcher.c")


@functools.cache
def launcher() -> Callable[[int, list, int], int] | None:
    """``launch(entry_address, arrays, segment)``, or None when it cannot be built."""
    flags = (f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}")
    try:
        path = toolchain.compile_shared_library(_SOURCE.read_text(), name="ember_launcher",
                                                extra_flags=flags)
    except CompileError:
        return None
    function = ctypes.PyDLL(str(path)).ember_launch
    function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function
