"""MLP training through ``jit`` with sharded inputs (the SPMD partitioner) across the
processes of `ember launch` (also run as one process), on 4 devices: the step is
written for global arrays, as in one process, and the partitioner adds the
collectives. Data-parallel two ways (arguments that carry a sharding: global arrays of
the batch; and ``in_shardings`` / ``out_shardings`` with whole NumPy values), FSDP, and
tensor-parallel on a 2-D mesh. Process 0 writes the loss
curves, the trained parameters and the collective counts to the JSON file named by the
first argument."""
import json
import sys
from collections import Counter

import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember import P
from ember.experimental import multihost_utils
from ember.sharding import NamedSharding

ember.distributed.initialize()
STEPS, LR = 20, 0.1
mesh = ember.make_mesh((ember.device_count("cpu"),), ("data",))
rng = np.random.default_rng(0)
params = {"w1": rng.normal(size=(8, 16)).astype(np.float32) * 0.5,
          "w2": rng.normal(size=(16, 8)).astype(np.float32) * 0.5}
X = rng.normal(size=(16, 8)).astype(np.float32)
Y = rng.normal(size=(16, 8)).astype(np.float32)


def loss_fn(p, x, y):
    return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)


def step(p, x, y):
    loss, grads = ember.value_and_grad(loss_fn)(p, x, y)
    return {k: p[k] - LR * grads[k] for k in p}, loss


def train(jitted, *data):
    p, curve = params, []
    for _ in range(STEPS):
        p, loss = jitted(p, *data)
        curve.append(float(loss))
    assert all(a.sharding.is_fully_replicated for a in p.values())
    return {"losses": [v.hex() for v in curve],
            "params": {k: np.asarray(v).tolist() for k, v in p.items()}}


def counts(jitted, *data):
    """The partitioner's collectives, the host steps across processes that run them
    in this process's program, and the first step's loss through the compiled program
    (ahead of time: ``jit(...).lower(...).compile()``)."""
    compiled = jitted.lower(params, *data).compile()
    host_steps = Counter(e.prim.name for e in compiled.executable.optimized.eqns
                         if e.prim.name.startswith("process_"))
    return {"partitioner": dict(Counter(c.kind for c in compiled.spmd_program.collectives)),
            "host_steps": dict(host_steps),
            "compiled_first_loss": float(compiled(params, *data)[1]).hex()}


rows = len(X) // ember.process_count()
mine = slice(ember.process_index() * rows, (ember.process_index() + 1) * rows)
batch = NamedSharding(mesh, P("data"))
xs = ember.make_array_from_process_local_data(batch, X[mine])
ys = ember.make_array_from_process_local_data(batch, Y[mine])
by_arguments = ember.jit(step)
results = {"arguments": train(by_arguments, xs, ys) | {"counts": counts(by_arguments, xs, ys)}}

with ember.set_mesh(mesh):
    annotated = ember.jit(step, in_shardings=(P(), P("data"), P("data")),
                          out_shardings=(P(), P()))
    results["in_shardings"] = train(annotated, X, Y) | {"counts": counts(annotated, X, Y)}
    sharded_loss = ember.jit(loss_fn, in_shardings=(P(), P("data"), P("data")))(params, X, Y)
    results["sharded_loss_shape"] = list(sharded_loss.shape)



def train_sharded(jitted, specs, steps=10):
    """``steps`` of ``jitted`` from whole NumPy values; the loss curve and the
    parameters, gathered whole (each is split as ``specs`` says)."""
    p, curve = params, []
    for _ in range(steps):
        p, loss = jitted(p, X, Y)
        curve.append(float(loss))
    assert all(p[k].sharding.devices_indices_map(p[k].shape)
               == specs[k].devices_indices_map(p[k].shape) for k in p)
    return {"losses": [v.hex() for v in curve],
            "params": {k: multihost_utils.process_allgather(v, tiled=True).tolist()
                       for k, v in p.items()}}


# FSDP: parameters and batch split over 'data'; tensor-parallel on a 2-D mesh:
# w1's columns and w2's rows split over 'model', the batch over 'data'
fsdp = {k: NamedSharding(mesh, P("data")) for k in params}
results["fsdp"] = train_sharded(ember.jit(step, in_shardings=(fsdp, batch, batch),
                                          out_shardings=(fsdp, None)), fsdp)
grid = ember.make_mesh((2, 2), ("data", "model"))
megatron = {"w1": NamedSharding(grid, P(None, "model")),
            "w2": NamedSharding(grid, P("model", None))}
rows_of = NamedSharding(grid, P("data"))
results["tensor_parallel"] = train_sharded(
    ember.jit(step, in_shardings=(megatron, rows_of, rows_of), out_shardings=(megatron, None)),
    megatron)

if ember.process_count() == 2 and ember.local_device_count("cpu") == 2:
    # Still unsupported: a dimension split over two axes whose shards of one process
    # are not contiguous (here 'model' crosses the processes, 'data' does not).
    crossed = ember.sharding.Mesh(np.array(ember.devices("cpu")).reshape(2, 2).T,
                               ("data", "model"))
    try:
        ember.jit(jnp.tanh, in_shardings=NamedSharding(crossed, P(("data", "model"))))(X)
    except ember.errors.EmberValueError as error:
        results["unsupported"] = str(error)

if ember.process_index() == 0:
    with open(sys.argv[1], "w") as out:
        json.dump(results, out)
print("final loss", float.fromhex(results["arguments"]["losses"][-1]))
