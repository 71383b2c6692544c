"""``with_sharding_constraint``: ask the partitioner to split a value (as
``jax.lax.with_sharding_constraint``).

Unlike JAX, which silently replicates a value it cannot split evenly (jax#26946), an
uneven split is an error that names the dimension, its size and the mesh axis.
"""
from __future__ import annotations

from typing import Any

from ember.core.pytree import tree_flatten, tree_unflatten
from ember.core.trace import is_tracing
from ember.errors import EmberTypeError, EmberValueError
from ember.ops.sharding_constraint import sharding_constraint_p

__all__ = ["with_sharding_constraint"]


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` (a pytree), split as ``shardings`` says: a ``NamedSharding`` or a
    ``PartitionSpec`` (under ``ember.set_mesh``), or a pytree prefix of ``x`` of them.
    Outside ``jit`` the arrays are resharded at once."""
    from ember.core.pytree import broadcast_prefix
    from ember.sharding.partition_spec import PartitionSpec
    from ember.sharding.placement import as_sharding, put_sharded
    from ember.sharding.shardings import NamedSharding, Sharding

    is_target = lambda t: isinstance(t, (Sharding, PartitionSpec)) or t is None  # noqa: E731
    leaves, tree = tree_flatten(x)
    try:
        targets = broadcast_prefix(shardings, x, is_leaf=is_target)
    except ValueError:
        raise EmberValueError(f"with_sharding_constraint: shardings {shardings!r} must be a "
                              f"pytree prefix of the value, structured as {tree}") from None
    out = []
    for index, (leaf, target) in enumerate(zip(leaves, targets)):
        if target is None:
            out.append(leaf)
            continue
        sharding = as_sharding(target, "with_sharding_constraint")
        if not isinstance(sharding, NamedSharding):
            raise EmberTypeError(f"with_sharding_constraint takes NamedShardings or "
                                 f"PartitionSpecs, got {type(sharding).__name__}")
        shape = tuple(getattr(leaf, "shape", ()))
        try:
            sharding.shard_shape(shape)
        except EmberValueError as error:
            where = f" (leaf {index})" if len(leaves) > 1 else ""
            raise EmberValueError(f"with_sharding_constraint{where}: {error}") from None
        if is_tracing():
            out.append(sharding_constraint_p.bind(leaf, sharding=sharding))
        else:
            out.append(put_sharded(leaf, sharding, "with_sharding_constraint"))
    return tree_unflatten(tree, out)
