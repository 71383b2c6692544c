"""Data-parallel MLP training through ``jit`` with sharded inputs (the SPMD partitioner)
across the processes of `ember launch` (also run as one process): the step is written
for global arrays, as in one process, and the partitioner adds the all-reduce. Two
ways in: arguments that carry a sharding (global arrays of the batch), and
``in_shardings`` / ``out_shardings`` with whole NumPy values. Process 0 writes the loss
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

if ember.process_count() == 2 and ember.local_device_count("cpu") == 2:
    # Still unsupported: a dimension split over two axes whose shards of one process
    # are not contiguous (here 'model' crosses the processes, 'data' does not).
    grid = ember.sharding.Mesh(np.array(ember.devices("cpu")).reshape(2, 2).T,
                               ("data", "model"))
    try:
        ember.jit(jnp.tanh, in_shardings=NamedSharding(grid, P(("data", "model"))))(X)
    except ember.errors.EmberValueError as error:
        results["unsupported"] = str(error)

if ember.process_index() == 0:
    with open(sys.argv[1], "w") as out:
        json.dump(results, out)
print("final loss", float.fromhex(results["arguments"]["losses"][-1]))
