"""The executable of the CPU backend: a loaded C module plus the host calls between its
native segments. A call prepares the pointer array (inputs, fresh outputs, the arena),
runs each segment with one call of the launcher, and returns the outputs as NumPy
arrays. Host calls find their operands and place their results through slots and arena
offsets worked out once, when the program is configured."""
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
from ember.ir.graph import Eqn
from ember.ir.interpreter import as_numpy, reference_results
from ember.passes.memory import Location


@dataclass(frozen=True)
class Reshaped:
    """A host call's operand read from where another value, which it reshapes, is stored
    (``Group.host_reads``)."""

    location: Location


@dataclass
class HostCall:
    eqn: Eqn
    inputs: list[Any]  # Location, Reshaped, or a Literal's value
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


class _Read:
    """Where a call finds a value, worked out once per program: a literal, a slot of the
    pointer array, or bytes of the arena (viewed with the value's dtype and shape)."""

    __slots__ = ("literal", "slot", "start", "end", "dtype", "shape", "reshape")

    def __init__(self, item: Any, aval: Any, layout: Layout) -> None:
        self.reshape = isinstance(item, Reshaped)  # (a slot's array comes in its own shape)
        if self.reshape:
            item = item.location
        self.literal = None if isinstance(item, Location) else item
        self.slot = None
        self.start = self.end = -1  # (not in the arena)
        self.dtype, self.shape = (aval.dtype, aval.shape) if aval is not None else (None, None)
        if isinstance(item, Location) and item.kind == "arena":
            self.start, self.end = item.offset, item.offset + aval.nbytes
        elif isinstance(item, Location):
            self.slot = layout.slot(item)

    def value(self, arrays: list) -> Any:
        if self.slot is not None:
            return arrays[self.slot].reshape(self.shape) if self.reshape else arrays[self.slot]
        if self.start < 0:
            return self.literal
        return arrays[0][self.start:self.end].view(self.dtype).reshape(self.shape)


class _HostStep:
    """A host call with the places of its operands and results worked out once."""

    __slots__ = ("call", "reads", "writes", "reads_arena")

    def __init__(self, call: HostCall, layout: Layout) -> None:
        eqn = call.eqn
        self.call = call
        self.reads = [_Read(item, var.aval, layout) for item, var in zip(call.inputs, eqn.inputs)]
        self.writes = [(None if location is None else layout.slot(location), var.aval.dtype)
                       for var, location in zip(eqn.outputs, call.outputs)]
        # (only a value read from the arena may come back as a view of it)
        self.reads_arena = any(read.start >= 0 for read in self.reads)


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
        self._steps = [step if step.__class__ is int else _HostStep(step, layout)
                       for step in program]
        self._constants = [contiguous(c) for c in constants]
        self._output_avals = [(a.shape, a.dtype, a.nbytes) for a in output_avals]
        self._host_slots = [None] * layout.host
        self._direct = all(kind == "literal" or value[0].kind != "arena"
                           for kind, value in results)
        self._result_reads = [_Read(value, None, layout) if kind == "literal"
                              else _Read(value[0], value[1].aval, layout)
                              for kind, value in results]
        self._result_slots = [(None, value) if kind == "literal"
                              else (layout.slot(value[0]), None) for kind, value in results]
        self._arena_bytes = max(arena_bytes, 64)
        self._arena = np.empty(self._arena_bytes, np.uint8)
        self._arena_lock = threading.Lock()
        # (compiled with config.profile: host calls are timed here, native steps in C)
        self._profiling = hasattr(getattr(self, "library", None), "ember_profile_read")
        self._single_call = (arena_bytes == 0 and program == [0] and layout.host == 0
                             and self._direct)
        self._result_places = _result_places(self._result_slots, layout, len(constants),
                                             program, self._output_avals)
        self._set_launcher(ready_launcher())
        return self

    def _set_launcher(self, launch: Any) -> None:
        self._launch = launch
        self._simple = self._single_call and launch is not None

    def run(self, buffers: Sequence[Any]) -> list[Any]:
        if self._launch is None:  # the launcher may have been built since
            self._set_launcher(ready_launcher())
        if self._simple:  # one native call, no temporaries: the common small function
            arrays = [None, *buffers, *self._constants,
                      *[POOL.empty(*spec) for spec in self._output_avals]]
            if not self._launch(self._address, arrays, 0):  # a buffer is not contiguous
                arrays[1:1 + len(buffers)] = map(contiguous, buffers)
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
            for step in self._steps:
                if step.__class__ is int:
                    self._native(arrays, step)
                else:
                    self._host_call(step, arrays)
            if self._direct:
                return [arrays[slot] if slot is not None else literal
                        for slot, literal in self._result_slots]
            return [read.value(arrays).copy() if read.start >= 0 else read.value(arrays)
                    for read in self._result_reads]
        finally:
            if owned:
                self._arena_lock.release()

    def run_at(self, addresses: Sequence[int]) -> list[np.ndarray] | None:
        """The results of a call whose inputs are given by address: C-contiguous host
        memory of the compiled shapes and dtypes, which the caller keeps alive and
        unchanged during the call (a front end's own tensors, read without a NumPy view
        of each). None, running nothing, where this program cannot take addresses: it has
        host calls (which read NumPy arrays), returns a constant, a literal or one output
        twice, or the launcher is not built yet. A result that is an argument, as it is,
        comes back as None (``returned_arguments``: the caller has it)."""
        if self._launch is None:
            self._set_launcher(ready_launcher())
        if self._result_places is None or self._launch is None:
            return None
        outputs = [POOL.empty(*spec) for spec in self._output_avals]
        owned = self._arena_lock.acquire(blocking=False)
        arena = self._arena if owned else POOL.empty((self._arena_bytes,), np.uint8,
                                                     self._arena_bytes)
        try:
            arrays = [arena, *addresses, *self._constants, *outputs]
            for segment in self._program:  # (every item is an address or contiguous)
                self._launch(self._address, arrays, segment)
        finally:
            if owned:
                self._arena_lock.release()
        return [outputs[place] if place >= 0 else None for place in self._result_places]

    def returned_arguments(self) -> dict[int, int]:
        """{result position: argument index} of the results that are an argument as it
        is (``run_at`` returns None there)."""
        return {position: ~place for position, place in enumerate(self._result_places or ())
                if place < 0}

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
        if self._launch is not None and self._launch(self._address, arrays, segment):
            return  # (every buffer here is contiguous: the launcher always runs)
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

    def _host_call(self, host: _HostStep, arrays: list) -> None:
        if not self._profiling:
            self._run_host_call(host, arrays)
            return
        started = time.perf_counter()
        self._run_host_call(host, arrays)
        hosts = self.__dict__.setdefault("_host_profile", {})
        calls, seconds = hosts.get(host.call.step, (0, 0.0))
        hosts[host.call.step] = (calls + 1, seconds + time.perf_counter() - started)

    def _run_host_call(self, host: _HostStep, arrays: list) -> None:
        call = host.call
        values = [read.value(arrays) for read in host.reads]
        # (a runner runs control flow, whose primitives have multiple results)
        results = call.runner(values) if call.runner is not None else reference_results(
            call.eqn.prim, values, call.eqn.params)
        for value, (slot, dtype) in zip(results, host.writes):
            if slot is None:
                continue
            array = contiguous(as_numpy(value, dtype))
            if host.reads_arena and np.may_share_memory(array, arrays[0]):
                array = array.copy()
            arrays[slot] = array


def _result_places(result_slots: list, layout: Layout, constants: int, program: list,
                   output_avals: list) -> list[int] | None:
    """Where each result is, for ``run_at``: its output's index, or ``~i`` for argument
    i returned as it is; None where a result is something else (a constant, a literal),
    two results are one output, a host call runs, or an output is empty (a size-0
    tensor's address may be null)."""
    if layout.host or any(step.__class__ is not int for step in program):
        return None
    first_output = 1 + layout.inputs
    arguments = layout.inputs - constants
    places = []
    for slot, _ in result_slots:
        if slot is not None and first_output <= slot < first_output + layout.outputs:
            places.append(slot - first_output)
        elif slot is not None and 1 <= slot <= arguments:
            places.append(~(slot - 1))
        else:
            return None
    outputs = [place for place in places if place >= 0]
    if len(set(outputs)) != len(outputs) or any(nbytes == 0 for _, _, nbytes in output_avals):
        return None
    return places


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
