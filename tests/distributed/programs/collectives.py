"""Every collective over mesh axes that cross processes (and ones that do not), on the
8 CPU devices of `ember launch` (also run as one process of 8 devices): process 0
writes each result, gathered whole, to the JSON file named by the first argument, so
the test can compare the splits of the mesh among processes bit for bit."""
import hashlib
import json
import sys

import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember import lax
from ember.experimental import multihost_utils
from ember.sharding import NamedSharding, P

ember.distributed.initialize()
assert ember.device_count("cpu") == 8


def global_array(mesh, spec, value):
    sharding = NamedSharding(mesh, spec)
    return ember.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def whole(mesh, spec, block, shape):
    """The global value of a jitted shard_map's result (this process's block)."""
    return multihost_utils.process_allgather(ember.make_array_from_process_local_data(
        NamedSharding(mesh, spec), np.asarray(block), shape)).tolist()


def run(mesh, body, in_spec, out_spec, value, shape):
    """``body`` over ``value`` (its result has the global shape ``shape``)."""
    f = ember.jit(ember.shard_map(body, mesh=mesh, in_specs=in_spec, out_specs=out_spec))
    return whole(mesh, out_spec, f(global_array(mesh, in_spec, value)), shape)


line = ember.make_mesh((8,), ("i",))
grid = ember.make_mesh((2, 4), ("a", "b"))  # in 4 processes, both axes cross them
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 16)).astype(np.float32)
cube = rng.standard_normal((8, 8, 6)).astype(np.float32)
shift = [(j, (j + 1) % 8) for j in range(8)]
results = {
    "psum": run(line, lambda v: lax.psum(v, "i"), P("i"), P(), x, (1, 16)),
    "axis_index": run(line, lambda v: v[:1, :1] * 0 + lax.axis_index("i"), P("i"), P("i"),
                      x, (8, 1)),
    "all_gather": run(line, lambda v: lax.all_gather(v, "i", tiled=True), P("i"), P("i"),
                      x, (64, 16)),
    "ppermute": run(line, lambda v: lax.ppermute(v, "i", shift), P("i"), P("i"), x,
                    (8, 16)),
    # all_to_all from P('i') to P(None, 'i') is the identity on the global array
    "all_to_all_identity": run(line, lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True),
                               P("i"), P(None, "i"), x, (8, 16)),
    "all_to_all_tiled": run(line, lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True),
                            P("i"), P("i"), x, (64, 2)),
    "all_to_all_untiled": run(line, lambda v: lax.all_to_all(v[0], "i", 0, 1)[None],
                              P("i"), P("i"), cube, (8, 6, 8)),
    "all_to_all_round_trip": run(
        line, lambda v: lax.all_to_all(lax.all_to_all(v, "i", 1, 0, tiled=True), "i", 0, 1,
                                       tiled=True), P("i"), P("i"), x, (8, 16)),
    "all_to_all_grid_a": run(grid, lambda v: lax.all_to_all(v, "a", 2, 1, tiled=True),
                             P("a", "b"), P("a", "b"), cube, (8, 16, 3)),
    "all_to_all_grid_b": run(grid, lambda v: lax.all_to_all(v, "b", 0, 1, tiled=True),
                             P("a", "b"), P("a", "b"), cube, (2, 32, 6)),
}

# more than a meeting's signature carries: the data moves in MPI collectives of its own
# (sums, maxima: a reduce-scatter whose chunks need padding, here; gathers: an Allgather)
wide = rng.standard_normal((8, 16387)).astype(np.float32)
for name, body, spec in [("psum_large", lambda v: lax.psum(v, "i"), P()),
                         ("pmax_large", lambda v: lax.pmax(v, "i"), P()),
                         ("ppermute_large", lambda v: lax.ppermute(v, "i", shift), P("i"))]:
    shape = (1, 16387) if spec == P() else wide.shape
    value = np.asarray(run(line, body, P("i"), spec, wide, shape), np.float32)
    results[name] = hashlib.sha256(value.tobytes()).hexdigest()


# the gradient of a loss through all_to_all, inside shard_map (its transpose runs too)
def loss(v, w):
    return lax.psum(jnp.sum(lax.all_to_all(v, "i", 1, 0, tiled=True) * w), "i")


weights = rng.standard_normal((64, 2)).astype(np.float32)
grad = ember.jit(ember.shard_map(lambda v, w: ember.grad(loss)(v, w), mesh=line,
                                 in_specs=(P("i"), P("i")), out_specs=P("i")))
results["all_to_all_grad"] = whole(line, P("i"), grad(
    global_array(line, P("i"), x), global_array(line, P("i"), weights)), x.shape)


# ... and from outside shard_map: the exchange across processes transposes itself
def outside(v, w):
    exchanged = ember.shard_map(lambda u: lax.all_to_all(u, "i", 1, 0, tiled=True),
                                mesh=line, in_specs=P("i"), out_specs=P("i"))(v)
    return jnp.sum(exchanged * w)  # this process's part of the loss


results["all_to_all_grad_outside"] = whole(line, P("i"), ember.jit(ember.grad(outside))(
    global_array(line, P("i"), x), global_array(line, P("i"), weights)), x.shape)



# bucketing: two psums and two pmaxes in a loop body, two pmaxes and a pmin after it
def looped(v):
    def step(k, carry):
        a, b = carry
        return (a + lax.psum(a * 0.5, "i") * 0.01 + lax.pmax(b, "i"),
                b + lax.psum(b + 1.0, "i") * 0.01 - lax.pmax(a * 0.1, "i"))
    a, b = lax.fori_loop(0, 3, step, (v, v * 2))
    return lax.pmax(a, "i") + lax.pmin(b, "i") + lax.pmax(b * 2, "i")


results["bucketed_in_loop"] = run(line, looped, P("i"), P(), x, (1, 16))
if ember.process_count() > 1:  # the host steps across processes, by loop depth
    from ember.ir.graph import subgraphs

    def host_steps(graph, depth=0):
        found = []
        for eqn in graph.eqns:
            if eqn.prim.name.startswith("process_"):
                found.append(f"{depth} {eqn.prim.name} {len(eqn.inputs)}")
            found += [s for sub in subgraphs(eqn.params) for s in host_steps(sub, depth + 1)]
        return found

    program = ember.jit(ember.shard_map(looped, mesh=line, in_specs=P("i"), out_specs=P()))
    optimized = program.lower(global_array(line, P("i"), x)).compile().executable.optimized
    results["host_steps"] = sorted(host_steps(optimized))

if ember.process_index() == 0:
    with open(sys.argv[1], "w") as out:
        json.dump(results, out)
ember.distributed.shutdown()
