"""Varying manual axes: which shard_map axes a traced value differs along.

Inside ``shard_map`` each mesh axis is a batch interpreter (``ember.transforms.vmap``),
and a value the interpreter holds unbatched is the same on every shard of that axis:
invariant. JAX 0.10 (``check_vma=True``) types this, and so transposes the implicit
broadcast of an invariant value to a varying one into a psum: the gradient of a
replicated parameter is already summed over the shards. Ember applies that psum where
reverse mode hands a cotangent back to its primal (``sum_cotangents``), which is the
same by linearity.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember.ops.rules import Zero

__all__ = ["sum_cotangents", "varying_axes"]


def varying_axes(value: Any) -> set:
    """The ``check_vma`` axes (shard_map's) along which ``value`` differs per shard."""
    from ember.transforms.vmap import BatchTracer

    axes = set()
    while isinstance(value, BatchTracer):
        data = value._trace.main.global_data
        if value.batch_dim is not None and data.check_vma:
            axes.add(data.name)
        value = value.value
    return axes


def sum_cotangents(primals: Sequence[Any], cotangents: Sequence[Any]) -> list[Any]:
    """Each cotangent psummed over the axes it varies along but its primal does not."""
    from ember.lax.parallel import psum

    summed = []
    for primal, ct in zip(primals, cotangents):
        if ct is not None and not isinstance(ct, Zero):
            extra = varying_axes(ct) - varying_axes(primal)
            if extra:
                ct = psum(ct, tuple(sorted(extra, key=str)))
        summed.append(ct)
    return summed
