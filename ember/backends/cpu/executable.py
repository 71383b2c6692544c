"""The executable of the CPU backend: a loaded C module plus the host calls between its
native segments. A call prepares the pointer array (inputs, fresh outputs, the arena),
runs each segment with one ctypes call, and returns the outputs as NumPy arrays."""
from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.backends.base import Executable
from ember.backends.cpu.launcher import ready_launcher
from ember.compiler.c_module import Layout
from ember.backends.cpu.pool import POOL
from ember.errors import EmberValueError
from ember.ir.graph import Eqn, Var
from ember.ir.interpreter import as_numpy, reference_results
from ember.passes.memory import Location


@dataclass
class HostCall:
    eqn: Eqn
    inputs: list[Any]  # Location, or a Literal's value
    outputs: list[Location | None]  # None: an output nothing reads
    runner: Callable[[list], list] | None = None  # instead of the NumPy reference
    step: int = -1  # its position among the program's steps (kernels)


class LoopFrame:
    """A program's pointer array for calls from a native loop: arena, arguments (slots
    1...; the loop points its carries there), constants, outputs, then literal results;
    ``results``: the slot of each result after a call. ``arrays`` keeps them alive."""

    def __init__(self, address: int, arrays: list, results: np.ndarray,
                 outputs: range) -> None:
        self.address = address
        self.arrays = arrays
        self.results = results
        self.outputs = outputs  # the slots of the program's outputs
        self.pointers = np.array([0 if a is None else a.ctypes.data for a in arrays],
                                 np.uintp)

    def set_arguments(self, values: Sequence[Any]) -> None:
        """The first arguments are ``values`` for every call of the loop."""
        for index, value in enumerate(values, start=1):
            array = contiguous(value)
            self.arrays[index] = array
            self.pointers[index] = array.ctypes.data


class _Call:
    """The buffers of one run: ``arrays`` is the pointer layout (arena, inputs, outputs,
    host results) as NumPy arrays."""

    __slots__ = ("arrays", "layout")

    def __init__(self, arrays: list, layout: Layout) -> None:
        self.arrays = arrays
        self.layout = layout

    def array(self, location: Location, var: Var) -> np.ndarray:
        if location.kind != "arena":
            return self.arrays[self.layout.slot(location)]
        view = self.arrays[0][location.offset:location.offset + var.aval.nbytes]
        return view.view(var.aval.dtype).reshape(var.aval.shape)

    def set(self, location: Location, array: np.ndarray) -> None:
        self.arrays[self.layout.slot(location)] = array


class _Detail:
    """A field of ``Executable`` computed when first read, by the describer the backend
    gave (``described_later``): from the stages of a compile just done, or, for a
    program-cache hit, by generating the program again up to its C source."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, executable: Any, owner: type | None = None) -> Any:
        if executable is None:
            return self
        if self.slot not in executable.__dict__:
            executable._describe()
        return executable.__dict__[self.slot]

    def __set__(self, executable: Any, value: Any) -> None:
        executable.__dict__[self.slot] = value


class CpuExecutable(Executable):
    """Runs a compiled program. ``program`` lists segment numbers and host calls in order."""

    optimized = _Detail()
    kernels = _Detail()
    cost = _Detail()
    memory = _Detail()
    schedule_text = _Detail()
    cache_entry = None  # what the program cache keeps of a fresh compile (NativeProgram)

    @classmethod
    def described_later(cls, graph: Any,
                        describe: Callable[[], dict[str, Any]]) -> CpuExecutable:
        """An executable of ``graph`` whose details (optimized graph, kernels, cost,
        memory, schedule text) ``describe()`` gives when first read."""
        executable = cls.__new__(cls)
        executable.graph = graph
        executable._describer = describe
        return executable

    def _describe(self) -> None:
        for name, value in self._describer().items():
            setattr(self, name, value)

    def configure(self, entry: Any, layout: Layout, program: list[int | HostCall],
                  constants: Sequence[np.ndarray], output_avals: Sequence[Any],
                  results: list[tuple[str, Any]], arena_bytes: int) -> CpuExecutable:
        self._entry = entry
        self._address = ctypes.cast(entry, ctypes.c_void_p).value
        self._layout = layout
        self._program = program
        self._constants = [contiguous(c) for c in constants]
        self._output_avals = [(a.shape, a.dtype, a.nbytes) for a in output_avals]
        self._host_slots = [None] * layout.host
        self._results = results
        self._direct = all(kind == "literal" or value[0].kind != "arena"
                           for kind, value in results)
        self._result_slots = [(None, value) if kind == "literal"
                              else (layout.slot(value[0]), None) for kind, value in results]
        self._arena_bytes = max(arena_bytes, 64)
        self._arena = np.empty(self._arena_bytes, np.uint8)
        self._arena_lock = threading.Lock()
        # (compiled with config.profile: host calls are timed here, native steps in C)
        self._profiling = hasattr(getattr(self, "library", None), "ember_profile_read")
        self._single_call = (arena_bytes == 0 and program == [0] and layout.host == 0
                             and self._direct)
        self._set_launcher(ready_launcher())
        return self

    def _set_launcher(self, launch: Any) -> None:
        self._launch = launch
        self._simple = self._single_call and launch is not None

    def run(self, buffers: Sequence[Any]) -> list[Any]:
        if self._launch is None:  # the launcher may have been built since
            self._set_launcher(ready_launcher())
        if self._simple:  # one native call, no temporaries: the common small function
            arrays = [None, *map(contiguous, buffers), *self._constants,
                      *[POOL.empty(*spec) for spec in self._output_avals]]
            self._launch(self._address, arrays, 0)
            return [arrays[slot] if slot is not None else literal
                    for slot, literal in self._result_slots]
        owned = self._arena_lock.acquire(blocking=False)
        arena = self._arena if owned else POOL.empty((self._arena_bytes,), np.uint8,
                                                     self._arena_bytes)
        try:
            arrays = [arena, *map(contiguous, buffers), *self._constants,
                      *[POOL.empty(*spec) for spec in self._output_avals],
                      *self._host_slots]
            call = _Call(arrays, self._layout)
            for step in self._program:
                if step.__class__ is int:
                    self._native(arrays, step)
                else:
                    self._host_call(step, call)
            if self._direct:
                return [arrays[slot] if slot is not None else literal
                        for slot, literal in self._result_slots]
            return [self._result(kind, value, call) for kind, value in self._results]
        finally:
            if owned:
                self._arena_lock.release()

    def loop_frame(self) -> LoopFrame | None:
        """This program set up to be called from a native loop (launcher.c), or None
        when it cannot be: host calls between native segments, results in the arena."""
        if self._program != [0] or self._layout.host or not self._direct:
            return None
        arguments = self._layout.inputs - len(self._constants)
        outputs = [np.empty(shape, dtype) for shape, dtype, _ in self._output_avals]
        literals = [literal for slot, literal in self._result_slots if slot is None]
        arrays = [np.empty(self._arena_bytes, np.uint8), *[None] * arguments,
                  *self._constants, *outputs, *literals]
        next_literal = iter(range(self._layout.size, len(arrays)))
        results = [slot if slot is not None else next(next_literal)
                   for slot, _ in self._result_slots]
        first_output = 1 + self._layout.inputs
        return LoopFrame(self._address, arrays, np.array(results, np.int64),
                         range(first_output, first_output + self._layout.outputs))

    def _native(self, arrays: list, segment: int) -> None:
        if self._launch is not None:
            self._launch(self._address, arrays, segment)
            return
        pointers = np.array([0 if a is None else a.ctypes.data for a in arrays], np.uintp)
        self._entry(pointers.ctypes.data, segment)

    def profile(self, reset: bool = False) -> list[tuple[int, float]]:
        """(calls, seconds) of every step (as ``kernels``) since compiled or last reset;
        the program must have been compiled with ``config.profile`` on."""
        try:
            read = self.library.ember_profile_read
        except AttributeError:
            raise EmberValueError(
                "this program was compiled without profiling: turn it on before compiling "
                "(ember.config.update('profile', True), or EMBER_PROFILE=1)") from None
        count = len(self.kernels)
        seconds, calls = np.zeros(count), np.zeros(count, np.int64)
        read(ctypes.c_void_p(seconds.ctypes.data), ctypes.c_void_p(calls.ctypes.data),
             ctypes.c_int(int(reset)))
        hosts = self.__dict__.setdefault("_host_profile", {})
        for step, (host_calls, host_seconds) in hosts.items():
            calls[step], seconds[step] = host_calls, host_seconds
        if reset:
            hosts.clear()
        return [(int(n), float(t)) for n, t in zip(calls, seconds)]

    def _host_call(self, host: HostCall, call: _Call) -> None:
        started = time.perf_counter()
        self._run_host_call(host, call)
        if self._profiling:
            hosts = self.__dict__.setdefault("_host_profile", {})
            calls, seconds = hosts.get(host.step, (0, 0.0))
            hosts[host.step] = (calls + 1, seconds + time.perf_counter() - started)

    def _run_host_call(self, host: HostCall, call: _Call) -> None:
        eqn = host.eqn
        values = [call.array(item, var) if isinstance(item, Location) else item
                  for item, var in zip(host.inputs, eqn.inputs)]
        # (a runner runs control flow, whose primitives have multiple results)
        results = host.runner(values) if host.runner is not None else reference_results(
            eqn.prim, values, eqn.params)
        for var, value, location in zip(eqn.outputs, results, host.outputs):
            if location is None:
                continue
            array = contiguous(as_numpy(value, var.aval.dtype))
            if np.may_share_memory(array, call.arrays[0]):
                array = array.copy()
            call.set(location, array)

    def _result(self, kind: str, value: Any, call: _Call) -> np.ndarray:
        if kind == "literal":
            return value
        location, var = value
        array = call.array(location, var)
        if location.kind == "arena":
            array = array.copy()
        return array


def contiguous(buffer: Any) -> np.ndarray:
    """``buffer`` as a C-contiguous array of its own shape (``np.ascontiguousarray``
    would make a 0-d array 1-d)."""
    array = buffer if buffer.__class__ is np.ndarray else np.asarray(buffer)
    if not array.flags.c_contiguous:
        array = np.asarray(array, order="C")
    return array


def entry_point(library: Any) -> Callable:
    function = library.run
    function.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    function.restype = None
    return function
