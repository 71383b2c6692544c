"""Data-parallel MLP training across the processes of `ember launch` (also run as one
process): 20 SGD steps; process 0 writes the loss curve (and the final parameters) to
the JSON file named by the first argument. The same program works on any split of the
8 shards among processes."""
import json
import sys

import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember import lax
from ember.sharding import NamedSharding, P

ember.distributed.initialize()
SHARDS = ember.device_count("cpu")
mesh = ember.make_mesh((SHARDS,), ("data",))
rng = np.random.default_rng(0)
X = rng.standard_normal((64, 8)).astype(np.float32)
Y = np.sin(X.sum(axis=1, keepdims=True)).astype(np.float32)
params = {"w1": (rng.standard_normal((8, 16)) * 0.3).astype(np.float32),
          "b1": np.zeros(16, np.float32),
          "w2": (rng.standard_normal((16, 1)) * 0.3).astype(np.float32)}


def loss_fn(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return lax.pmean(jnp.mean((h @ p["w2"] - y) ** 2), "data")


def step(p, x, y):
    loss, grads = ember.value_and_grad(loss_fn)(p, x, y)
    return ember.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), loss


step = ember.jit(ember.shard_map(step, mesh=mesh, in_specs=(P(), P("data"), P("data")),
                                 out_specs=(P(), P())))
rows = len(X) // ember.process_count()
mine = slice(ember.process_index() * rows, (ember.process_index() + 1) * rows)
data = NamedSharding(mesh, P("data"))
x = ember.make_array_from_process_local_data(data, X[mine])
y = ember.make_array_from_process_local_data(data, Y[mine])
assert x.shape == X.shape and len(x.addressable_shards) == ember.local_device_count("cpu")
losses = []
for _ in range(20):
    params, loss = step(params, x, y)
    losses.append(float(loss))
if ember.process_index() == 0:
    with open(sys.argv[1], "w") as out:
        json.dump({"losses": [v.hex() for v in losses],
                   "params": {k: np.asarray(v).tolist() for k, v in params.items()}}, out)
print("final loss", losses[-1])
