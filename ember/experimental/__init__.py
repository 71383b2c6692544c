"""``ember.experimental``: APIs of ``jax.experimental`` (``checkify``)."""
