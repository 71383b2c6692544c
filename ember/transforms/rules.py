"""Helpers that attach common transformation rules to primitives.

Elementwise primitives share one batching rule; other shared rule makers live here
too, so that each ops module states *which* rule applies, not how it works.
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.core.primitive import Primitive


def move_batch_axis(x: Any, src: int | None, dst: int, size: int) -> Any:
    """Put the batch axis of ``x`` at ``dst``; an unbatched ``x`` is broadcast to ``size``."""
    from ember.ops.structural import broadcast_in_dim, transpose

    if src is None:
        shape = list(x.shape)
        shape.insert(dst, size)
        kept = [i for i in range(len(shape)) if i != dst]
        return broadcast_in_dim(x, tuple(shape), tuple(kept))
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def batch_size(values: Sequence[Any], dims: Sequence[int | None]) -> int:
    for value, dim in zip(values, dims):
        if dim is not None:
            return value.shape[dim]
    raise ValueError("no batched operand")


def def_elementwise_batch(prim: Primitive) -> None:
    """Batch by moving every batch axis to the front (broadcasting unbatched operands)."""
    from ember.ops.structural import broadcast_in_dim

    def rule(values: Sequence[Any], dims: Sequence[int | None], **params: Any):
        size = batch_size(values, dims)
        logical = [v.shape if d is None else v.shape[:d] + v.shape[d + 1:]
                   for v, d in zip(values, dims)]
        full = max(logical, key=len)
        moved = []
        for value, dim, shape in zip(values, dims, logical):
            value = move_batch_axis(value, dim, 0, size)
            if shape != full:  # a scalar bound / predicate next to full-rank operands
                offset = len(full) - len(shape)
                value = broadcast_in_dim(value, (size, *full),
                                         (0, *range(1 + offset, 1 + len(full))))
            moved.append(value)
        return prim.bind(*moved, **params), 0

    prim.def_batch(rule)
