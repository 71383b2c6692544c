"""``ember.custom_batching``: functions with their own vmap rule, as
``jax.custom_batching``."""
from ember.transforms.custom_vmap import custom_vmap, sequential_vmap

__all__ = ["custom_vmap", "sequential_vmap"]
