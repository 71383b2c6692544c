"""``ember.lax.linalg``: matrix decompositions and triangular solves (as ``jax.lax.linalg``)."""
from ember.ops.decompositions import *  # noqa: F401,F403
