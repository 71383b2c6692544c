"""Counter-based random bits: the Threefry-2x32 block cipher as one primitive.

``threefry2x32(k0, k1, x0, x1)`` encrypts the counter pairs ``(x0, x1)`` with the key
``(k0, k1)`` (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
20 rounds as in JAX and Random123's default. All four operands are uint32 arrays of
one shape; the two outputs have that shape too. Only exact uint32 arithmetic is
involved (add modulo 2**32, rotate, xor), so every backend yields identical bits.

The bits are not differentiable (the jvp rule is waived); ``ember.random`` builds keys,
splitting and distributions on top of this primitive.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops.rules import batch_size, move_batch_axis

__all__ = ["threefry2x32"]

# Rotation distances of Threefry-2x32, applied in groups of four rounds, alternating.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# Key-schedule parity constant of Threefish / Threefry.
_PARITY = np.uint32(0x1BD11BDA)
_ROUNDS = 20

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)


@threefry2x32_p.def_abstract_eval
def _threefry_abstract(*avals: ShapedArray) -> list[ShapedArray]:
    if len(avals) != 4:
        raise EmberTypeError(f"threefry2x32 takes 4 operands (k0, k1, x0, x1), got {len(avals)}")
    for aval in avals:
        if aval.dtype != dtypes.uint32:
            raise EmberTypeError(
                f"threefry2x32 needs uint32 operands, got {[a.dtype.name for a in avals]}")
        if aval.shape != avals[0].shape:
            raise EmberValueError(
                f"threefry2x32 needs operands of one shape, got {[a.shape for a in avals]}")
    return [avals[0], avals[0]]


def _rotate_left(x: Any, distance: int) -> Any:
    return (x << np.uint32(distance)) | (x >> np.uint32(32 - distance))


def threefry_rounds(k0: Any, k1: Any, x0: Any, x1: Any) -> list[Any]:
    """The cipher in operators only (``+ ^ << >> |`` on uint32): it runs on NumPy arrays
    (the reference implementation) and traces on Ember arrays into plain elementwise
    primitives (passes/threefry.py: how native backends get it as one fused kernel)."""
    keys = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = x0 + keys[0], x1 + keys[1]
    for group in range(_ROUNDS // 4):
        for distance in _ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, distance) ^ x0
        # Key injection after every four rounds.
        injection = group + 1
        x0 = x0 + keys[injection % 3]
        x1 = x1 + keys[(injection + 1) % 3] + np.uint32(injection)
    return [x0, x1]


@threefry2x32_p.def_impl
def _threefry_impl(k0: np.ndarray, k1: np.ndarray, x0: np.ndarray,
                   x1: np.ndarray) -> list[np.ndarray]:
    k0, k1, x0, x1 = (np.asarray(v, dtype=np.uint32) for v in (k0, k1, x0, x1))
    with np.errstate(over="ignore"):
        return threefry_rounds(k0, k1, x0, x1)


@threefry2x32_p.def_batch
def _threefry_batch(values: Sequence[Any], dims: Sequence[int | None]):
    size = batch_size(values, dims)
    moved = [move_batch_axis(v, d, 0, size) for v, d in zip(values, dims)]
    return threefry2x32_p.bind(*moved), [0, 0]


threefry2x32_p.waive("jvp", "random bits are not differentiable")
threefry2x32_p.waive("transpose", "random bits are not linear in any operand")


def threefry2x32(k0: Any, k1: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """Threefry-2x32 (20 rounds) of counters ``(x0, x1)`` under key ``(k0, k1)``.

    All operands are uint32 arrays of one shape; returns the two uint32 output words.
    """
    out0, out1 = threefry2x32_p.bind(k0, k1, x0, x1)
    return out0, out1


threefry2x32_p.waive("sharding", "computed on whole operands, so bits do not depend on the mesh")
