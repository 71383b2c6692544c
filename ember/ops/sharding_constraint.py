"""``sharding_constraint``: the identity, asking the partitioner to split its result as
``sharding`` says (``ember.lax.with_sharding_constraint``).

The parameter is the ``NamedSharding`` itself (``ops`` only reads its ``mesh`` and
``spec``). Derivatives are constrained the same way, so a constraint on an activation
also places its gradient; a batched constraint leaves the batch dimension whole.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.ops.rules import deflinear
from ember.ops.sharding_rules import ShardingDecision, ShardingQuery

__all__ = ["sharding_constraint_p", "constraint_dims"]

sharding_constraint_p = Primitive("sharding_constraint")


def constraint_dims(sharding: Any, ndim: int) -> tuple[tuple[str, ...], ...]:
    """The split a sharding asks for, one tuple of mesh axes per dimension."""
    return tuple(sharding.spec.axes_of(d) for d in range(ndim))


@sharding_constraint_p.def_abstract_eval
def _abstract(x: ShapedArray, *, sharding: Any) -> ShapedArray:
    return x


@sharding_constraint_p.def_impl
def _impl(x: np.ndarray, *, sharding: Any) -> np.ndarray:
    return np.asarray(x)


deflinear(sharding_constraint_p,
          lambda ct, x, *, sharding: [sharding_constraint_p.bind(ct, sharding=sharding)])


@sharding_constraint_p.def_batch
def _batch(values, dims, *, sharding):
    (x,), (dim,) = values, dims
    entries = list(sharding.spec) + [None] * (np.ndim(x) - 1 - len(sharding.spec))
    entries.insert(dim, None)
    batched = type(sharding)(sharding.mesh, type(sharding.spec)(*entries))
    return sharding_constraint_p.bind(x, sharding=batched), dim


@sharding_constraint_p.def_sharding
def _sharding(query: ShardingQuery) -> ShardingDecision:
    dims = constraint_dims(query.params["sharding"], query.in_avals[0].ndim)
    return ShardingDecision([dims], [dims])
