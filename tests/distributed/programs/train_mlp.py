"""Data-parallel MLP training across the processes of `ember launch` (also run as one
process): 20 SGD steps; process 0 writes the loss curve (and the final parameters) to
the JSON file named by the first argument. The same program works on any split of the
8 shards among processes.

``--save DIR`` writes a checkpoint of the trained parameters and the sharded data;
``--restore DIR`` first reads one (written by another number of processes) and checks
it against what this run computes."""
import argparse
import json

import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember import lax
from ember.sharding import NamedSharding, P

from ember.distributed import checkpoint

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--save")
parser.add_argument("--restore")
options = parser.parse_args()
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
restored = None
if options.restore:  # a checkpoint of another process count, resharded onto this one
    back = checkpoint.restore(options.restore, {"params": {k: NamedSharding(mesh, P())
                                                           for k in params},
                                                "x": data})
    assert back["x"].shape == X.shape
    assert np.array_equal(np.asarray(back["x"].local_data), X[mine])
    restored = all(np.array_equal(np.asarray(back["params"][k]), np.asarray(params[k]))
                   for k in params)
from ember.experimental import multihost_utils  # noqa: E402


# --- the same MLP, tensor-parallel on a 2-D mesh and fully sharded (FSDP) --------------

def global_array(sharding, value):
    return ember.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def train_sharded(mesh, specs, loss, steps=20):
    """SGD on parameters split as ``specs``; the loss curve and the gathered result."""
    def step(p, x, y):
        value, grads = ember.value_and_grad(loss)(p, x, y)
        return ember.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), value

    batch = NamedSharding(mesh, P("data"))
    run = ember.jit(ember.shard_map(step, mesh=mesh, in_specs=(specs, P("data"), P("data")),
                                    out_specs=(specs, P())))
    p = {k: global_array(NamedSharding(mesh, specs[k]), v) for k, v in initial.items()}
    xs, ys = global_array(batch, X), global_array(batch, Y)
    curve = []
    for _ in range(steps):
        p, value = run(p, xs, ys)  # inside jit: this process's blocks in and out
        curve.append(float(value))
    whole = {k: multihost_utils.process_allgather(ember.make_array_from_process_local_data(
        NamedSharding(mesh, specs[k]), np.asarray(v), initial[k].shape)).tolist()
        for k, v in p.items()}
    return {"losses": [v.hex() for v in curve], "params": whole}


def tensor_parallel_loss(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])  # this shard's hidden units
    out = lax.psum(h @ p["w2"], "model")
    return lax.pmean(jnp.mean((out - y) ** 2), "data")


def fsdp_loss(p, x, y):
    whole = {k: lax.all_gather(v, "data", tiled=True) for k, v in p.items()}
    return loss_fn(whole, x, y)


rng = np.random.default_rng(0)
X = rng.standard_normal((64, 8)).astype(np.float32)
Y = np.sin(X.sum(axis=1, keepdims=True)).astype(np.float32)
initial = {"w1": (rng.standard_normal((8, 16)) * 0.3).astype(np.float32),
           "b1": np.zeros(16, np.float32),
           "w2": (rng.standard_normal((16, 1)) * 0.3).astype(np.float32)}
sharded = {
    "tensor_parallel": train_sharded(
        ember.make_mesh((2, SHARDS // 2), ("data", "model")),
        {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None)},
        tensor_parallel_loss),
    "fsdp": train_sharded(mesh, {"w1": P("data"), "b1": P("data"), "w2": P("data")},
                          fsdp_loss),
}

utilities = {
    "allgather_global": bool(np.array_equal(multihost_utils.process_allgather(x), X)),
    "allgather_ranks": multihost_utils.process_allgather(
        np.array([ember.process_index()])).ravel().tolist(),
    "broadcast": multihost_utils.broadcast_one_to_all(
        np.full(3, ember.process_index(), np.int32)).tolist(),
}
multihost_utils.sync_global_devices("after training")
if options.save:
    checkpoint.save(options.save, {"params": params, "x": x})
if ember.process_index() == 0:
    with open(options.out, "w") as out:
        json.dump({"losses": [v.hex() for v in losses], "restored_equal": restored,
                   "utilities": utilities, "sharded": sharded,
                   "params": {k: np.asarray(v).tolist() for k, v in params.items()}}, out)
print("final loss", losses[-1])
ember.distributed.shutdown()  # every process waits for the others, then works alone
assert ember.process_count() == 1 and not ember.distributed.is_initialized()
