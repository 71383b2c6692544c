"""shard_map with spmd_execution="per_device": the per-device program, compiled once,
runs on one thread per device, its collectives through shared memory, in the fixed
global order: a run is bitwise reproducible, its collectives give bitwise the fused
mode's results, and whole programs agree with the fused mode to float32 rounding."""
from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P, lax
from ember.sharding import device_threads

X = np.arange(8, dtype=np.float32)
SHIFT = [(j, (j + 1) % 8) for j in range(8)]


@pytest.fixture(params=["reference", "cpu"])
def host_backend(request):
    with ember.config.override(backend=request.param):
        yield request.param


@pytest.fixture
def mesh8(host_backend):
    return ember.make_mesh((8,), ("i",), devices=ember.devices(host_backend))


@pytest.fixture
def mesh42(host_backend):
    return ember.make_mesh((4, 2), ("data", "model"), devices=ember.devices(host_backend))


def per_device():
    return ember.config.override(spmd_execution="per_device")


def smap(mesh, body, in_specs=P("i"), out_specs=P("i")):
    return ember.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


@contextlib.contextmanager
def counting_runs():
    """How many per_device runs start inside the block (each: one thread per device)."""
    runs = []
    original = device_threads.DeviceRun._run

    def counted(self, arguments):
        runs.append(len(arguments))
        return original(self, arguments)

    device_threads.DeviceRun._run = counted
    try:
        yield runs
    finally:
        device_threads.DeviceRun._run = original


def both_modes(f, *args):
    """``f(*args)`` fused, and twice per device (which must really run per device).
    ``f`` jits its shard_maps: a per-device run is always the compiled program, an
    eager fused one runs op by op (other kernels, other roundings)."""
    fused = f(*args)
    with per_device(), counting_runs() as runs:
        threaded, again = f(*args), f(*args)
    assert runs, "the shard_map did not run per device"
    return fused, threaded, again


def assert_bitwise(a, b):
    for x, y in zip(ember.tree.leaves(a), ember.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert np.asarray(x).dtype == np.asarray(y).dtype


def assert_same_results(fused, threaded, again, bitwise=False):
    """Per device, a run is bitwise reproducible (a fixed reduction order) and agrees
    with the fused run to float32 rounding: the per-shard work around the collectives
    is the same math, but unbatched it is other kernels (NumPy's pairwise sums over
    other shapes; C kernels that may contract a psum's producer into the sum, a*b + acc
    as one FMA, where the threads sum rounded products). ``bitwise``: where the
    collectives are all the arithmetic, bitwise the fused run (the same order)."""
    assert_bitwise(threaded, again)
    if bitwise:
        assert_bitwise(fused, threaded)
    for x, y in zip(ember.tree.leaves(fused), ember.tree.leaves(threaded)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)


# --- the collectives' semantics on 8 devices ----------------------------------------------

@pytest.mark.parametrize("jitted", [False, True])
def test_collectives_on_eight_device_threads(mesh8, jitted):
    wrap = ember.jit if jitted else (lambda f: f)
    with per_device(), counting_runs() as runs:
        np.testing.assert_array_equal(wrap(smap(mesh8, lambda a: lax.psum(a, "i")))(X),
                                      np.full(8, 28.0))
        index = wrap(smap(mesh8, lambda a: lax.axis_index("i")[None]))(X)
        np.testing.assert_array_equal(index, np.arange(8))
        assert np.asarray(index).dtype == np.int32
        shifted = wrap(smap(mesh8, lambda a: lax.ppermute(a, "i", SHIFT)))(X)
        np.testing.assert_array_equal(shifted, [7, 0, 1, 2, 3, 4, 5, 6])
        partial = wrap(smap(mesh8, lambda a: lax.ppermute(a, "i", [(0, 3), (5, 1)])))(X)
        np.testing.assert_array_equal(partial, [0, 5, 0, 0, 0, 0, 0, 0])
        tiled = wrap(smap(mesh8, lambda a: lax.all_gather(a, "i", tiled=True)))(X)
        assert tiled.shape == (64,)
        np.testing.assert_array_equal(tiled, np.tile(X, 8))
        scattered = wrap(smap(mesh8, lambda a: lax.psum_scatter(jnp.tile(a, 8), "i",
                                                                tiled=True)))(X)
        np.testing.assert_array_equal(scattered, np.full(8, 28.0))
        z = np.arange(64, dtype=np.float32).reshape(8, 8)
        there = wrap(smap(mesh8, lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True),
                          P("i"), P(None, "i")))
        back = wrap(smap(mesh8, lambda a: lax.all_to_all(a, "i", 0, 1, tiled=True),
                         P(None, "i"), P("i")))
        np.testing.assert_array_equal(back(there(z)), z)
    assert runs == [8] * 8  # every one of them ran on 8 device threads


def test_reductions_and_a_4x2_mesh(mesh8, mesh42):
    y = np.array([3, -1, 4, 1, -5, 9, 2, 6], np.float32)
    for fn in (lax.pmean, lax.pmax, lax.pmin):
        assert_same_results(*both_modes(ember.jit(smap(mesh8, lambda a, fn=fn: fn(a, "i"),
                                                       out_specs=P())), y), bitwise=True)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    for body, out in ((lambda a: lax.psum(a, ("data", "model")), P()),
                      (lambda a: lax.psum(a, "model"), P("data")),
                      (lambda a: lax.axis_index(("data", "model")).reshape(1, 1)
                       + 0 * a[:1, :1].astype(np.int32), P("data", "model")),
                      (lambda a: lax.ppermute(a, "data", [(0, 1), (1, 2), (2, 3), (3, 0)])
                       * lax.axis_index("model"), P("data", "model"))):
        assert_same_results(*both_modes(ember.jit(smap(mesh42, body, P("data", "model"),
                                                       out)), x), bitwise=True)


def test_large_reductions_split_among_the_threads_bitwise(mesh8):
    """Buffers above device_communicator.WHOLE_ELEMENTS are reduced a chunk per thread,
    still in the fixed order (sums of float32 values whose order shows)."""
    x = np.random.default_rng(0).normal(size=(8, 40_001)).astype(np.float32) * 1e4
    f = ember.jit(smap(mesh8, lambda a: (lax.psum(a, "i"), lax.pmax(a, "i")),
                       out_specs=(P("i"), P("i"))))
    assert_same_results(*both_modes(f, x), bitwise=True)


# --- gradients ----------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    lambda a: a * lax.psum(a, "i"),
    lambda a: a * lax.pmean(a * a, "i"),
    lambda a: lax.all_gather(a, "i", tiled=True) ** 2,
    lambda a: lax.all_gather(a, "i", axis=1) * 2.0,
    lambda a: lax.psum_scatter(jnp.cos(a), "i", scatter_dimension=1, tiled=True),
    lambda a: a * lax.ppermute(a, "i", [(0, 2), (2, 3), (3, 0), (5, 7)]),
    lambda a: lax.all_to_all(a * a, "i", 1, 0, tiled=True),
    # (pmax / pmin have no derivative, as in JAX: their values enter as constants)
    lambda a: a * (lax.pmax(lax.stop_gradient(a), "i") - lax.pmin(lax.stop_gradient(a), "i")),
], ids=["psum", "pmean", "all_gather", "all_gather_stacked", "psum_scatter", "ppermute",
        "all_to_all", "pmax_pmin"])
def test_gradients_inside_the_body_equal_the_fused_ones(mesh8, body):
    """Each device differentiates its own program (the body's gradient crosses the
    collectives' transposes: psum -> pvary, all_gather <-> psum_scatter, ...); the
    fused gradients are checked against numerical ones in test_collectives.py."""
    x = np.random.default_rng(3).normal(size=(8, 16)).astype(np.float32)
    grad = smap(mesh8, ember.grad(lambda a: jnp.sum(jnp.sin(body(a)))))
    fused, threaded, again = both_modes(ember.jit(grad), x)
    assert_same_results(fused, threaded, again)
    with per_device():  # called eagerly, it runs the same compiled per-device program
        assert_bitwise(grad(x), threaded)


# --- training: bitwise the fused run ------------------------------------------------------

STEPS, LR = 20, 0.1


def _data(seed, batch=16, d_in=6, hidden=16, d_out=4):
    rng = np.random.default_rng(seed)
    params = {"w1": rng.normal(size=(d_in, hidden)).astype(np.float32) * 0.5,
              "w2": rng.normal(size=(hidden, d_out)).astype(np.float32) * 0.5}
    return (params, rng.normal(size=(batch, d_in)).astype(np.float32),
            rng.normal(size=(batch, d_out)).astype(np.float32))


def _train(step, params, x, y):
    losses = []
    for _ in range(STEPS):
        params, loss = step(params, x, y)
        losses.append(np.asarray(loss))
    return params, losses


def _sgd(params, grads):
    return {k: params[k] - LR * grads[k] for k in params}


def test_data_parallel_training_matches_the_fused_run(mesh8):
    params, x, y = _data(0)

    def step(params, x, y):
        local = lambda p: lax.pmean(jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2),
                                    "i")
        loss, grads = ember.value_and_grad(local)(params)
        return _sgd(params, grads), loss

    sharded = ember.jit(smap(mesh8, step, (P(), P("i"), P("i")), (P(), P())))
    fused, threaded, again = both_modes(_train, sharded, params, x, y)
    assert_same_results(fused, threaded, again)
    assert threaded[1][-1] < threaded[1][0]  # it trains


def test_tensor_parallel_training_matches_the_fused_run(mesh8):
    """Megatron: w1 split by columns, w2 by rows, one psum in the forward pass."""
    params, x, y = _data(1)

    def step(params, x, y):
        def local(p):
            partial = jnp.tanh(x @ p["w1"]) @ p["w2"]
            return jnp.mean((lax.psum(partial, "i") - y) ** 2)
        loss, grads = ember.value_and_grad(local)(params)
        return _sgd(params, grads), loss

    specs = {"w1": P(None, "i"), "w2": P("i", None)}
    sharded = ember.jit(smap(mesh8, step, (specs, P(), P()), (specs, P())))
    fused, threaded, again = both_modes(_train, sharded, params, x, y)
    assert_same_results(fused, threaded, again)
    assert threaded[1][-1] < threaded[1][0]


def test_two_d_mesh_training_matches_the_fused_run(mesh42):
    params, x, y = _data(2)
    specs = {"w1": P(None, "model"), "w2": P("model", None)}

    def step(params, x, y):
        def local(p):
            out = lax.psum(jnp.tanh(x @ p["w1"]) @ p["w2"], "model")
            return lax.pmean(jnp.mean((out - y) ** 2), "data")
        loss, grads = ember.value_and_grad(local)(params)
        return _sgd(params, grads), loss

    sharded = ember.jit(smap(mesh42, step, (specs, P("data"), P("data")), (specs, P())))
    assert_same_results(*both_modes(_train, sharded, params, x, y))


def test_jit_with_sharded_inputs_runs_per_device(mesh8):
    """The partitioner's program executes through shard_map, so it runs per device
    too."""
    params, x, y = _data(3)
    batch = ember.NamedSharding(mesh8, P("i"))
    xs, ys = ember.device_put(x, batch), ember.device_put(y, batch)

    @ember.jit
    def step(params, x, y):
        loss, grads = ember.value_and_grad(
            lambda p: jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2))(params)
        return _sgd(params, grads), loss

    fused, threaded, again = both_modes(_train, step, params, xs, ys)
    assert_same_results(fused, threaded, again)  # (the mode is part of jit's cache key)
    with per_device(), counting_runs() as runs:
        step(params, xs, ys)
    assert runs == [8]  # the step is one per-device run


# --- execution: threads, one compile, failures ---------------------------------------------

def test_each_device_runs_on_its_own_thread(mesh8):
    seen = {}

    def record(index):
        seen[int(index[0])] = threading.get_ident()
        return index

    def body(a):
        index = lax.axis_index("i")[None]
        index = ember.pure_callback(record, jax_shape(index), index,
                                    vmap_method="sequential")
        return lax.psum(a, "i") + index

    with per_device():
        out = ember.jit(smap(mesh8, body))(X)
    np.testing.assert_array_equal(out, 28 + np.arange(8))
    assert sorted(seen) == list(range(8))
    assert len(set(seen.values())) == 8
    assert seen[0] == threading.get_ident()  # the caller runs device 0


def jax_shape(x):
    return ember.ShapeDtypeStruct(x.shape, x.dtype)


def test_the_per_device_program_compiles_once(mesh8, capsys):
    """One compile for the 8 devices and for every later call of the same shapes."""
    f = smap(mesh8, lambda a: lax.ppermute(a * lax.psum(a, "i"), "i", SHIFT)
             + lax.axis_index("i"))
    with per_device(), ember.log_compiles():
        results = [f(X) for _ in range(3)]
    traced = [line for line in capsys.readouterr().out.splitlines()
              if "traced per-device program" in line]
    assert len(traced) == 1, traced
    want = np.roll(X * 28, 1) + np.arange(8)
    for result in results:
        np.testing.assert_array_equal(result, want)


def test_a_failing_device_raises_in_the_caller_naming_it(mesh8):
    def fail_on_five(index):
        if int(index[0]) == 5:
            raise ValueError("device five is broken")
        return index

    def body(a):
        index = lax.axis_index("i")[None]
        index = ember.pure_callback(fail_on_five, jax_shape(index), index,
                                    vmap_method="sequential")
        return lax.psum(a + index, "i")  # the others wait for device 5 here

    with per_device(), pytest.raises(ValueError, match="device five is broken") as caught:
        ember.jit(smap(mesh8, body))(X)
    notes = " ".join(getattr(caught.value, "__notes__", []))
    assert "{'i': 5}" in notes and "per_device shard_map" in notes, notes


def test_fused_where_per_device_does_not_apply(mesh8):
    """Under a transformation of the shard_map's caller (grad of it), the fused
    program runs, and gives the same values."""
    f = smap(mesh8, lambda a: a * lax.psum(a, "i"))
    g = ember.grad(lambda v: jnp.sum(f(v)))
    fused = g(X)
    with per_device(), counting_runs() as runs:
        same = g(X)
    assert runs == []
    assert_bitwise(fused, same)


def test_the_mode_is_a_checked_flag():
    from ember.config import FLAGS

    assert ember.config.spmd_execution == "fused"  # the default
    assert FLAGS["spmd_execution"].env_var == "EMBER_SPMD_EXECUTION"
    assert FLAGS["spmd_execution"].parse(" Per_Device ") == "per_device"
    with pytest.raises(ValueError, match="spmd_execution must be one of"):
        ember.config.update("spmd_execution", "threads")
