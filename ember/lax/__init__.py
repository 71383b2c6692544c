"""``ember.lax``: the primitive-level API (as ``jax.lax``): no implicit broadcasting or
promotion, explicit dimension numbers, structured control flow."""
from ember.lax.parallel import *  # noqa: F401,F403
from ember.ops.control_flow import *  # noqa: F401,F403
from ember.ops.cumulative import *  # noqa: F401,F403
from ember.ops.elementwise import *  # noqa: F401,F403
from ember.ops.fft import *  # noqa: F401,F403
from ember.ops.indexing import *  # noqa: F401,F403
from ember.ops.linalg import *  # noqa: F401,F403
from ember.ops.random_bits import *  # noqa: F401,F403
from ember.ops.reductions import *  # noqa: F401,F403
from ember.ops.sorting import *  # noqa: F401,F403
from ember.ops.structural import *  # noqa: F401,F403


def stop_gradient(x):
    """``x`` with a zero derivative (as ``jax.lax.stop_gradient``), leaf by leaf of a pytree."""
    from ember.transforms.api import stop_gradient as _stop_gradient

    return _stop_gradient(x)


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
