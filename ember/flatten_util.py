"""``ravel_pytree``: a pytree of arrays as one flat vector and back, as
``jax.flatten_util`` (optimizers over all parameters, ``scipy.optimize.minimize``)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.core.pytree import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(flat, unravel)``: the leaves raveled and joined in one 1-D array of their
    promoted dtype, and the function that splits such a vector back into the pytree
    (each leaf with its shape and dtype). Both trace under jit, grad and vmap."""
    import ember.numpy as jnp

    leaves, treedef = tree_flatten(pytree)
    leaves = [jnp.asarray(leaf) for leaf in leaves]
    shapes = [leaf.shape for leaf in leaves]
    leaf_dtypes = [leaf.dtype for leaf in leaves]
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
    dtype = jnp.result_type(*leaf_dtypes) if leaves else jnp.float32
    flat = (jnp.concatenate([jnp.ravel(leaf).astype(dtype) for leaf in leaves])
            if leaves else jnp.zeros((0,), dtype))
    offsets = np.cumsum([0, *sizes])

    def unravel(vector: Any) -> Any:
        vector = jnp.asarray(vector)
        if vector.shape != flat.shape:
            raise ValueError(f"unravel takes a vector of shape {flat.shape} (the raveled "
                             f"pytree), got {vector.shape}")
        parts = [jnp.reshape(vector[start:stop], shape).astype(leaf_dtype)
                 for start, stop, shape, leaf_dtype
                 in zip(offsets[:-1], offsets[1:], shapes, leaf_dtypes)]
        return tree_unflatten(treedef, parts)

    return flat, unravel
