"""Two small programs compiled by every process of `ember launch` (under a compile cache
the test chooses): each process prints its results, for the test to compare, while
EMBER_LOG=compile shows which process built what."""
import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember import lax
from ember.sharding import P

ember.distributed.initialize()
mesh = ember.make_mesh((ember.device_count("cpu"),), ("i",))
x = np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(4, 6)
total = ember.jit(ember.shard_map(lambda v: lax.psum(jnp.tanh(v) * 2.0 + 1.0, "i"),
                                  mesh=mesh, in_specs=P(), out_specs=P()))(x)
local = ember.jit(lambda v: jnp.exp(v).sum(axis=0) - v.max())(x)
print("results", np.asarray(total).tobytes().hex(), np.asarray(local).tobytes().hex())
ember.distributed.shutdown()
