"""``ember.lax``: the primitive-level API (as ``jax.lax``): no implicit broadcasting or
promotion, explicit dimension numbers, structured control flow."""
from ember.ops.elementwise import *  # noqa: F401,F403
from ember.ops.structural import *  # noqa: F401,F403
