"""``ember.example_libraries``: ``stax`` (layers as init / apply pairs) and ``optimizers``
(init / update / get_params triples), API-compatible with ``jax.example_libraries``."""
