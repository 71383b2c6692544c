"""Control flow (cond, while, scan) between native code: its bodies are compiled graphs.
A loop runs natively (launcher.c: one call of the compiled body per iteration, no Python
between them) when the launcher is built and the bodies have no host calls; otherwise,
and for a cond's branch choice, on the host."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember.backends.cpu.executable import LoopFrame, contiguous
from ember.backends.cpu.launcher import Loops, ready_loops
from ember.ir.graph import Eqn, Graph

Runner = Callable[[Sequence[Any]], list]
Compile = Callable[[Graph], Any]  # graph -> executable with .run(buffers)


def control_runner(eqn: Eqn, compile_graph: Compile) -> Runner | None:
    """A host implementation of ``eqn`` running compiled bodies, or None if not control flow."""
    builder = _BUILDERS.get(eqn.prim.name)
    return builder(eqn.params, compile_graph) if builder is not None else None


def _cond(params: dict, compile_graph: Compile) -> Runner:
    branches = [compile_graph(graph) for graph in params["branches"]]

    def run(values: Sequence[Any]) -> list:
        index = int(np.clip(np.asarray(values[0]), 0, len(branches) - 1))
        return branches[index].run(list(values[1:]))

    return run


def _while(params: dict, compile_graph: Compile) -> Runner:
    cond, body = compile_graph(params["cond_graph"]), compile_graph(params["body_graph"])
    n_cond, n_body = params["cond_nconsts"], params["body_nconsts"]
    carry_avals = params["body_graph"].in_avals[n_body:]

    def run(values: Sequence[Any]) -> list:
        cond_consts = list(values[:n_cond])
        body_consts = list(values[n_cond:n_cond + n_body])
        carry = list(values[n_cond + n_body:])
        native = _native_frames(cond, body)
        if native is not None:
            loops, (cond_frame, body_frame) = native
            cond_frame.set_arguments(cond_consts)
            body_frame.set_arguments(body_consts)
            carries = _Carries(carry, carry_avals, body_frame)
            count = loops.while_(
                cond_frame.address, cond_frame.pointers.ctypes.data, 1 + n_cond,
                int(cond_frame.results[0]), body_frame.address,
                body_frame.pointers.ctypes.data, 1 + n_body, len(carry), *carries.arguments(),
                body_frame.results.ctypes.data)
            return carries.final(count)
        while bool(np.asarray(cond.run(cond_consts + carry)[0])):
            carry = body.run(body_consts + carry)
        return carry

    return run


def _scan(params: dict, compile_graph: Compile) -> Runner:
    body = compile_graph(params["body"])
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    length, reverse = params["length"], params["reverse"]
    carry_avals = params["body"].in_avals[n_consts:n_consts + n_carry]
    ys_avals = params["body"].out_avals[n_carry:]

    def run(values: Sequence[Any]) -> list:
        consts = list(values[:n_consts])
        carry = list(values[n_consts:n_consts + n_carry])
        xs = [contiguous(x) for x in values[n_consts + n_carry:]]
        ys = [np.empty((length, *a.shape), a.dtype) for a in ys_avals]
        native = _native_frames(body)
        if native is not None:
            loops, (frame,) = native
            frame.set_arguments(consts)
            carries = _Carries(carry, carry_avals, frame)
            count = loops.scan(
                frame.address, frame.pointers.ctypes.data, length, int(reverse), n_carry,
                1 + n_consts, *carries.arguments(), len(xs), 1 + n_consts + n_carry,
                *_pointers_and_sizes(xs, [x.nbytes // max(length, 1) for x in xs]),
                len(ys), *_pointers_and_sizes(ys, [a.nbytes for a in ys_avals]),
                frame.results.ctypes.data)
            return [*carries.final(count), *ys]
        for i in (range(length - 1, -1, -1) if reverse else range(length)):
            outs = body.run(consts + carry + [x[i] for x in xs])
            carry = outs[:n_carry]
            for y, value in zip(ys, outs[n_carry:]):
                y[i] = value
        return [*carry, *ys]

    return run


def _native_frames(*programs: Any) -> tuple[Loops, list[LoopFrame]] | None:
    """The native loops and a frame per program, when the launcher is built and every
    program can be called from them; else None (the loop then runs in Python)."""
    loops = ready_loops()
    if loops is None or not all(hasattr(p, "loop_frame") for p in programs):
        return None
    frames = [p.loop_frame() for p in programs]
    return None if any(f is None for f in frames) else (loops, frames)


class _Carries:
    """A loop's carries in buffers of their own, and a second set (launcher.c trades the
    two sets' buffers every iteration): the body's own output buffers when each carry is
    an output of its own (swapped, never copied), else buffers to stage copies in."""

    def __init__(self, values: Sequence[Any], avals: Sequence[Any], body: LoopFrame) -> None:
        self.first = [np.array(v, dtype=a.dtype, order="C").reshape(a.shape)
                      for v, a in zip(values, avals)]
        slots = [int(slot) for slot in body.results[:len(self.first)]]
        self.swap = len(set(slots)) == len(slots) and all(s in body.outputs for s in slots)
        self.second = ([body.arrays[slot] for slot in slots] if self.swap
                       else [np.empty_like(v) for v in self.first])
        self._keep = (_pointers_and_sizes(self.first, [v.nbytes for v in self.first]),
                      _pointer_array(self.second))

    def arguments(self) -> tuple[int, int, int, int]:
        """(sizes, current pointers, staging pointers, swap) for launcher.c."""
        (current, sizes), staging = self._keep
        return sizes, current, staging, int(self.swap)

    def final(self, iterations: int) -> list[np.ndarray]:
        return self.second if iterations % 2 else self.first


def _pointers_and_sizes(arrays: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple:
    """(a C array of the arrays' data pointers, a C array of int64 ``sizes``), as
    addresses; the NumPy arrays holding them stay alive as long as the tuple."""
    return _pointer_array(arrays), _Owned(np.array(sizes, np.int64))


def _pointer_array(arrays: Sequence[np.ndarray]) -> _Owned:
    return _Owned(np.array([a.ctypes.data for a in arrays], np.uintp))


class _Owned(int):
    """The address of a NumPy array's data, keeping the array alive."""

    def __new__(cls, array: np.ndarray) -> _Owned:
        owned = super().__new__(cls, array.ctypes.data if array.size else 0)
        owned.array = array
        return owned


_BUILDERS = {"cond": _cond, "while": _while, "scan": _scan}
