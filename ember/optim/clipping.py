"""Gradient clipping."""
from __future__ import annotations

from typing import Any

import ember.numpy as jnp
from ember.core.pytree import tree_leaves, tree_map
from ember.optim.base import GradientTransformation


def global_norm(tree: Any) -> Any:
    """sqrt of the sum of squares of every leaf (computed in float32 at least)."""
    leaves = tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.square(leaf.astype(jnp.float32))) for leaf in leaves))


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all gradients down together when their global norm exceeds ``max_norm``."""

    def init(params: Any) -> tuple:
        return ()

    def update(grads: Any, state: tuple, params: Any = None):
        norm = global_norm(grads)
        scale = jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-12))
        return tree_map(lambda g: (g * scale).astype(g.dtype), grads), state

    return GradientTransformation(init, update)
