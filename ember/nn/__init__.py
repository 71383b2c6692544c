"""``ember.nn``: activation functions (as ``jax.nn``), initializers and layers."""
from ember.nn import initializers  # noqa: F401
from ember.nn.activations import *  # noqa: F401,F403
