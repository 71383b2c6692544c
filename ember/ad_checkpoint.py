"""``ember.ad_checkpoint``: rematerialization policies and names (as
``jax.ad_checkpoint``).

A policy is ``policy(prim, *avals, **params) -> bool``: True when the value an equation
computes inside a checkpointed function may be saved for the backward pass instead of
being recomputed. Pass one as ``ember.checkpoint(f, policy=...)``.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

from ember.transforms.remat import checkpoint, checkpoint_name, name_p, remat

__all__ = ["checkpoint", "remat", "checkpoint_name", "checkpoint_policies"]

Policy = Callable[..., bool]


def everything_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    return True


def nothing_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    return False


def dots_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    """Save the results of matrix products (dot_general), recompute everything else."""
    return prim.name == "dot_general"


def dots_with_no_batch_dims_saveable(prim: Any, *avals: Any, **params: Any) -> bool:
    if prim.name != "dot_general":
        return False
    (_, (lhs_batch, _)) = params["dimension_numbers"]
    return not lhs_batch


def save_only_these_names(*names: str) -> Policy:
    """Save exactly the values tagged with one of ``names`` by ``checkpoint_name``."""
    wanted = frozenset(names)

    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return prim is name_p and params["name"] in wanted

    return policy


def save_any_names_but_these(*names: str) -> Policy:
    """Save every value tagged by ``checkpoint_name`` except those named ``names``."""
    excluded = frozenset(names)

    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return prim is name_p and params["name"] not in excluded

    return policy


def save_from_both_policies(first: Policy, second: Policy) -> Policy:
    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return first(prim, *avals, **params) or second(prim, *avals, **params)

    return policy


checkpoint_policies = SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_from_both_policies=save_from_both_policies,
)
