"""The executable of the CPU backend: a loaded C module plus the host calls between its
native segments. A call prepares the pointer array (inputs, fresh outputs, the arena),
runs each segment with one ctypes call, and returns the outputs as NumPy arrays."""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ember.backends.base import Executable
from ember.backends.cpu.module import Layout
from ember.ir.graph import Eqn, Literal, Var
from ember.ir.interpreter import as_numpy, reference_apply
from ember.passes.memory import BufferPlan, Location


@dataclass
class HostCall:
    eqn: Eqn
    inputs: list[Any]  # Location, or a Literal's value
    outputs: list[Location | None]  # None: an output nothing reads


class _Call:
    """The buffers of one run."""

    __slots__ = ("inputs", "outputs", "host", "arena", "pointers")

    def __init__(self, inputs, outputs, host, arena, pointers) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.host = host
        self.arena = arena
        self.pointers = pointers

    def array(self, location: Location, var: Var) -> np.ndarray:
        if location.kind == "input":
            return self.inputs[location.slot]
        if location.kind == "output":
            return self.outputs[location.slot]
        if location.kind == "host":
            return self.host[location.slot]
        view = self.arena[location.offset:location.offset + var.aval.nbytes]
        return view.view(var.aval.dtype).reshape(var.aval.shape)


class CpuExecutable(Executable):
    """Runs a compiled program. ``program`` lists segment numbers and host calls in order."""

    def configure(self, entry: Callable, layout: Layout, plan: BufferPlan,
                  program: list[int | HostCall], constants: Sequence[np.ndarray],
                  output_avals: Sequence[Any], results: list[tuple[str, Any]],
                  arena_bytes: int, library: Any) -> "CpuExecutable":
        self._entry = entry
        self._layout = layout
        self._plan = plan
        self._program = program
        self._constants = [np.asarray(c, order="C") for c in constants]
        self._output_avals = list(output_avals)
        self._results = results
        self._arena_bytes = max(arena_bytes, 64)
        self._arena = np.empty(self._arena_bytes, np.uint8)
        self._arena_lock = threading.Lock()
        self._library = library  # keeps the shared object loaded
        return self

    def run(self, buffers: Sequence[Any]) -> list[Any]:
        inputs = [_contiguous(b) for b in buffers]
        inputs += self._constants
        outputs = [np.empty(a.shape, a.dtype) for a in self._output_avals]
        owned = self._arena_lock.acquire(blocking=False)
        arena = self._arena if owned else np.empty(self._arena_bytes, np.uint8)
        try:
            pointers = self._pointers(inputs, outputs, arena)
            call = _Call(inputs, outputs, [None] * self._layout.host, arena, pointers)
            address = pointers.ctypes.data
            for step in self._program:
                if isinstance(step, int):
                    self._entry(address, step)
                else:
                    self._host_call(step, call)
            return [self._result(kind, value, call) for kind, value in self._results]
        finally:
            if owned:
                self._arena_lock.release()

    def _pointers(self, inputs, outputs, arena) -> np.ndarray:
        pointers = np.empty(self._layout.size, np.uintp)
        pointers[0] = arena.ctypes.data
        for index, array in enumerate(inputs, start=1):
            pointers[index] = array.ctypes.data
        base = 1 + len(inputs)
        for index, array in enumerate(outputs, start=base):
            pointers[index] = array.ctypes.data
        return pointers

    def _host_call(self, host: HostCall, call: _Call) -> None:
        eqn = host.eqn
        values = [call.array(item, var) if isinstance(item, Location) else item
                  for item, var in zip(host.inputs, eqn.inputs)]
        results = reference_apply(eqn.prim, values, eqn.params)
        if not eqn.prim.multiple_results:
            results = [results]
        for var, value, location in zip(eqn.outputs, results, host.outputs):
            if location is None:
                continue
            array = np.asarray(as_numpy(value, var.aval.dtype), order="C")
            if np.may_share_memory(array, call.arena):
                array = array.copy()
            if location.kind == "host":
                call.host[location.slot] = array
            else:
                call.outputs[location.slot] = array
            call.pointers[self._layout.slot(location)] = array.ctypes.data

    def _result(self, kind: str, value: Any, call: _Call) -> np.ndarray:
        if kind == "literal":
            return value
        location, var = value
        array = call.array(location, var)
        if location.kind == "arena":
            array = array.copy()
        return array


def _contiguous(buffer: Any) -> np.ndarray:
    array = np.asarray(buffer)
    if not array.flags.c_contiguous:
        array = np.asarray(array, order="C")
    return array


def literal_result(atom: Literal) -> np.ndarray:
    array = np.array(atom.value, dtype=atom.aval.dtype)
    array.flags.writeable = False
    return array


def entry_point(library: Any) -> Callable:
    function = library.run
    function.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    function.restype = None
    return function
