"""``ember.nn``: activation functions (as ``jax.nn``), initializers and layers."""
from ember.nn import initializers  # noqa: F401
from ember.nn.activations import *  # noqa: F401,F403
from ember.nn.layers import (  # noqa: F401
    MLP,
    AvgPool2d,
    BatchNorm,
    CausalSelfAttention,
    Conv2d,
    Dropout,
    Embedding,
    Lambda,
    LayerNorm,
    Linear,
    MaxPool2d,
    RMSNorm,
    Sequential,
    avg_pool,
    dot_product_attention,
    max_pool,
)
from ember.nn.scaled import (  # noqa: F401
    get_scaled_dot_general_config,
    scaled_dot_general,
    scaled_matmul,
)

# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
