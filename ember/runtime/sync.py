"""Waiting for asynchronous results."""
from __future__ import annotations

from typing import Any

from ember.core.pytree import tree_leaves


def block_until_ready(tree: Any) -> Any:
    """Wait until every array in ``tree`` is computed; returns ``tree``."""
    for leaf in tree_leaves(tree):
        wait = getattr(leaf, "block_until_ready", None)
        if wait is not None:
            wait()
    return tree


def effects_barrier() -> None:
    """As ``jax.effects_barrier``: wait until the callbacks (``ember.debug.print``...) of
    the programs already called have run. Ember runs a program's host callbacks during
    its call, so by the time this is reached they have: there is nothing to wait for."""
