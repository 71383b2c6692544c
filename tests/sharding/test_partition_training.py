"""Training through ``jit`` with shardings (the SPMD partitioner) equals the unsharded
run: 20 SGD steps of an MLP, float32 against one device (rtol 1e-5, atol 1e-6), and
the partitioned program holds exactly the collectives the parallelism needs."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P
from ember.sharding import NamedSharding
from tests.conftest import BACKENDS
from tests.sharding.conftest import host_devices

STEPS, LR = 20, 0.1
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(params=["reference", "cpu"])
def backend(request):
    with ember.config.override(backend=request.param):
        yield request.param


@pytest.fixture(params=BACKENDS)
def any_backend(request):
    """Every backend present. The partitioned program is one program, compiled for
    the backend; where it has fewer than 8 devices (PoCL offers one OpenCL device)
    the mesh is over the host's devices and the SPMD program runs on the backend's
    device. (OpenCL runs one of these tests: its kernels take a while to build.)"""
    with ember.config.override(backend=request.param):
        yield request.param


def _data(seed=0, batch=16, d_in=8, hidden=16, d_out=8):
    rng = np.random.default_rng(seed)
    params = {"w1": rng.normal(size=(d_in, hidden)).astype(np.float32) * 0.5,
              "w2": rng.normal(size=(hidden, d_out)).astype(np.float32) * 0.5}
    x = rng.normal(size=(batch, d_in)).astype(np.float32)
    y = rng.normal(size=(batch, d_out)).astype(np.float32)
    return params, x, y


def _loss(params, x, y):
    return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2)


def _step(params, x, y):
    loss, grads = ember.value_and_grad(_loss)(params, x, y)
    return {k: params[k] - LR * grads[k] for k in params}, loss


def _train(step, params, *args):
    losses = []
    for _ in range(STEPS):
        params, loss = step(params, *args)
        losses.append(float(loss))
    return params, losses


def _assert_same_run(got, want):
    (p_got, l_got), (p_want, l_want) = got, want
    np.testing.assert_allclose(l_got, l_want, rtol=RTOL, atol=ATOL)
    for k in p_want:
        np.testing.assert_allclose(p_got[k], p_want[k], rtol=RTOL, atol=ATOL)
    assert l_want[-1] < l_want[0]  # the run trains


def _collectives(jitted, *args):
    program = jitted.lower(*args).compile().spmd_program
    in_graph = Counter(e.prim.name for e in program.graph.eqns
                       if e.prim.name in ("psum", "psum_scatter", "all_gather", "all_to_all"))
    listed = Counter(c.kind for c in program.collectives)
    names = {"psum": "all-reduce", "psum_scatter": "reduce-scatter",
             "all_gather": "all-gather", "all_to_all": "all-to-all"}
    assert listed == Counter({names[k]: n for k, n in in_graph.items()})
    return listed, program


def _mesh(shape, names, backend):
    return ember.make_mesh(shape, names, devices=host_devices(backend))


def test_data_parallel_through_jit_all_reduces_once_per_step(backend):
    mesh = _mesh((8,), ("data",), backend)
    params, x, y = _data()
    batch = NamedSharding(mesh, P("data"))
    xs, ys = ember.device_put(x, batch), ember.device_put(y, batch)
    step = ember.jit(_step)
    counts, program = _collectives(step, params, xs, ys)
    assert counts == Counter({"all-reduce": 1})  # loss and both gradients in one
    assert program.in_specs[-2:] == [P("data"), P("data")]
    want = _train(ember.jit(_step), params, x, y)
    _assert_same_run(_train(step, params, xs, ys), want)
    new_params, loss = step(params, xs, ys)
    assert loss.sharding.is_fully_replicated


def test_data_parallel_with_in_shardings_under_set_mesh(backend):
    mesh = _mesh((8,), ("data",), backend)
    params, x, y = _data(1)
    with ember.set_mesh(mesh):
        step = ember.jit(_step, in_shardings=(P(), P("data"), P("data")),
                         out_shardings=(P(), P()))
        counts, _ = _collectives(step, params, x, y)
        got = _train(step, params, x, y)
    assert counts == Counter({"all-reduce": 1})
    _assert_same_run(got, _train(ember.jit(_step), params, x, y))


def test_fsdp_gathers_forward_and_reduce_scatters_backward(any_backend):
    mesh = _mesh((8,), ("data",), any_backend)
    params, x, y = _data(2)
    fsdp = NamedSharding(mesh, P("data"))
    step = ember.jit(_step, in_shardings=(fsdp, fsdp, fsdp), out_shardings=(fsdp, None))
    counts, program = _collectives(step, params, x, y)
    # each weight is gathered for the forward pass (w2 again for the backward one),
    # and each gradient is reduce-scattered back onto its shards
    assert counts["all-gather"] >= 2 and counts["reduce-scatter"] == 2
    gathers = [c for c in program.collectives if c.kind == "all-gather"]
    assert all("test_partition_training.py" in str(c.source) for c in gathers)
    # the cause: the batch split of x takes 'data', so the weight must be whole
    assert all("mesh axis 'data' splits dimension 0 of operand 0" in c.reason
               for c in gathers)
    got = _train(step, params, x, y)
    assert got[0]["w1"].sharding == fsdp
    _assert_same_run(got, _train(ember.jit(_step), params, x, y))


def test_megatron_column_then_row_sharding(backend):
    mesh = _mesh((8,), ("model",), backend)
    params, x, y = _data(3)
    specs = {"w1": NamedSharding(mesh, P(None, "model")),
             "w2": NamedSharding(mesh, P("model", None))}
    rep = NamedSharding(mesh, P())
    forward = ember.jit(lambda p, x: jnp.tanh(x @ p["w1"]) @ p["w2"],
                        in_shardings=(specs, rep), out_shardings=rep)
    counts, _ = _collectives(forward, params, x)
    assert counts == Counter({"all-reduce": 1})  # one in the forward pass
    np.testing.assert_allclose(forward(params, x), np.tanh(x @ params["w1"]) @ params["w2"],
                               rtol=RTOL, atol=ATOL)
    step = ember.jit(_step, in_shardings=(specs, rep, rep), out_shardings=(specs, rep))
    _assert_same_run(_train(step, params, x, y), _train(ember.jit(_step), params, x, y))


def test_data_and_model_parallel_on_a_4x2_mesh(backend):
    mesh = _mesh((4, 2), ("data", "model"), backend)
    params, x, y = _data(4)
    specs = {"w1": NamedSharding(mesh, P(None, "model")),
             "w2": NamedSharding(mesh, P("model", None))}
    batch = NamedSharding(mesh, P("data"))
    step = ember.jit(_step, in_shardings=(specs, batch, batch),
                     out_shardings=(specs, NamedSharding(mesh, P())))
    counts, program = _collectives(step, params, x, y)
    axes = Counter(c.axis for c in program.collectives if c.kind == "all-reduce")
    assert axes["model"] >= 1 and axes["data"] >= 1
    _assert_same_run(_train(step, params, x, y), _train(ember.jit(_step), params, x, y))
