"""``ember.lax``: the primitive-level API (as ``jax.lax``): no implicit broadcasting or
promotion, explicit dimension numbers, structured control flow."""
from ember.lax.parallel import *  # noqa: F401,F403
from ember.lax.sharding import *  # noqa: F401,F403
from ember.ops.bitcast import *  # noqa: F401,F403
from ember.ops.control_flow import *  # noqa: F401,F403
from ember.ops.conv_shapes import *  # noqa: F401,F403
from ember.ops.cumulative import *  # noqa: F401,F403
from ember.ops.elementwise import *  # noqa: F401,F403
from ember.ops.fft import *  # noqa: F401,F403
from ember.ops.indexing import *  # noqa: F401,F403
from ember.ops.linalg import *  # noqa: F401,F403
from ember.ops.random_bits import *  # noqa: F401,F403
from ember.ops.reductions import *  # noqa: F401,F403
from ember.ops.sorting import *  # noqa: F401,F403
from ember.ops.structural import *  # noqa: F401,F403
from ember.lax.windowed import *  # noqa: F401,F403
from ember.lax.approx_top_k import *  # noqa: F401,F403
from ember.lax.integer_bits import *  # noqa: F401,F403
from ember.lax.reduce_precision import *  # noqa: F401,F403
from ember.lax.shorthands import *  # noqa: F401,F403,E402
from ember.lax.implicit import *  # noqa: F401,F403,E402
from ember.lax.platform import *  # noqa: F401,F403,E402


def stop_gradient(x):
    """``x`` with a zero derivative (as ``jax.lax.stop_gradient``), leaf by leaf of a pytree."""
    from ember.transforms.api import stop_gradient as _stop_gradient

    return _stop_gradient(x)


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())


def __getattr__(name: str):
    """The function of an elementwise op defined after import (``define_elementwise``)."""
    from ember.errors import user_errors
    from ember.ops.elementwise import ELEMENTWISE_OPS, lax_function

    for op in ELEMENTWISE_OPS.values():
        if op.lax_function_name == name:
            return user_errors(lax_function(op.name))
    raise AttributeError(f"module 'ember.lax' has no attribute {name!r}")
