"""``ember.experimental``: APIs of ``jax.experimental`` (``checkify``, ``io_callback``)."""
from ember.ops.callbacks import io_callback

__all__ = ["io_callback"]
