"""``ember.random``: counter-based random numbers with explicit keys, as ``jax.random``.

Threefry-2x32 (20 rounds) through the ``threefry2x32`` primitive: results depend only
on the key and the shape, so they are the same eagerly, under jit and on every backend,
and match JAX's for the same seed.
"""
from ember.random._distributions import *  # noqa: F401,F403
from ember.random._keys import *  # noqa: F401,F403
from ember.random._gamma_family import *  # noqa: F401,F403
from ember.random._counts import *  # noqa: F401,F403
from ember.random._transformed import *  # noqa: F401,F403

# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
