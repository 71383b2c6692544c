"""ember.checkpoint / remat: same gradients, less memory, policies choose what is saved."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.ad_checkpoint import checkpoint_name, checkpoint_policies as policies
from ember.test_util import check_grads
from ember.runtime.devices import available_backends
from ember.transforms.calls import inline_calls


def layer(w, h):
    return jnp.tanh(h @ w)


def deep_loss(ws, x, remat):
    h = x
    for w in ws:
        h = ember.checkpoint(layer, policy=remat)(w, h) if remat != "off" else layer(w, h)
    return jnp.sum(h * h)


@pytest.fixture
def mlp():
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((32, 32)) * 0.3).astype(np.float32) for _ in range(8)]
    return ws, rng.standard_normal((256, 32)).astype(np.float32)


def _grad_graph(ws, x, remat):
    return ember.jit(ember.grad(deep_loss), static_argnums=2).lower(ws, x, remat)


def _count(graph, name):
    return sum(e.prim.name == name for e in graph.eqns)


def test_checkpoint_gives_the_same_gradients(mlp, backend):
    ws, x = mlp
    expected = ember.grad(deep_loss)(ws, x, "off")
    for remat in (None, policies.dots_saveable, policies.everything_saveable):
        for got, want in zip(ember.jit(ember.grad(deep_loss), static_argnums=2)(ws, x, remat),
                             expected):
            # float32 sums over 256 examples, in another order on compiled backends
            scale = np.abs(np.asarray(want)).max()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


def test_checkpoint_lowers_peak_memory_of_the_compiled_gradient(mlp):
    ws, x = mlp
    with ember.config.override(backend="reference"):
        plain = _grad_graph(ws, x, "off").compile().memory_analysis()["peak_bytes"]
        remat = _grad_graph(ws, x, None).compile().memory_analysis()["peak_bytes"]
    activation = x.nbytes
    # Without remat every layer keeps its tanh output and its derivative alive until the
    # backward pass; with it, only the layer inputs: about one activation less per layer.
    assert remat < plain - 6 * activation


def test_policies_decide_what_is_recomputed(mlp):
    ws, x = mlp
    counts = {}
    for name, policy in [("off", "off"), ("nothing", None), ("dots", policies.dots_saveable),
                         ("everything", policies.everything_saveable)]:
        graph = _grad_graph(ws, x, policy).graph
        counts[name] = (_count(graph, "tanh"), _count(graph, "dot_general"))
    layers = len(ws)
    # forward: one product per layer; backward: two, less one for x (not differentiated)
    assert counts["off"] == counts["everything"] == (layers, 3 * layers - 1)
    assert counts["nothing"] == (2 * layers, 4 * layers - 1)  # the forward is recomputed
    assert counts["dots"] == (2 * layers, 3 * layers - 1)  # products saved, tanh recomputed


def test_save_by_name(x64):
    def f(x):
        a = checkpoint_name(jnp.sin(x), "a")
        b = checkpoint_name(jnp.sin(a), "b")
        return jnp.sum(jnp.sin(b))

    x = np.linspace(0.1, 1.0, 4)
    sins = {}
    for policy in (policies.save_only_these_names("a"),
                   policies.save_any_names_but_these("a"), policies.nothing_saveable):
        graph = ember.make_graph(ember.grad(ember.checkpoint(f, policy=policy)))(x)
        sins[policy] = _count(inline_calls(graph), "sin")
        np.testing.assert_allclose(ember.grad(ember.checkpoint(f, policy=policy))(x),
                                   ember.grad(f)(x))
    only_a, all_but_a, nothing = sins.values()
    assert nothing == 3 + 2  # forward, then sin(x) and sin(a) again for the backward pass
    assert only_a == 3 + 1  # sin(a) recomputed from the saved a
    assert all_but_a == 3 + 1  # sin(x) recomputed; b saved


def test_checkpoint_composes(x64):
    f = ember.checkpoint(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2))
    rng = np.random.default_rng(1)
    w, xs = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    check_grads(f, (w, xs), order=2, modes=("rev",))
    per_example = ember.vmap(ember.grad(f), in_axes=(None, 0))(w, xs)
    np.testing.assert_allclose(per_example[0], ember.grad(f)(w, xs[0]), rtol=1e-12)
    summed = ember.grad(lambda w: jnp.sum(ember.vmap(f, in_axes=(None, 0))(w, xs)))(w)
    np.testing.assert_allclose(summed, ember.grad(f)(w, xs), rtol=1e-12)
    _, tangent = ember.jvp(lambda w: f(w, xs), (w,), (np.ones_like(w),))
    np.testing.assert_allclose(tangent, np.asarray(ember.grad(f)(w, xs)).sum(), rtol=1e-12)


def test_checkpoint_with_static_argnums(x64):
    def power(x, n):
        for _ in range(n):
            x = jnp.sin(x)
        return x

    f = ember.checkpoint(power, static_argnums=1)
    np.testing.assert_allclose(ember.grad(f)(np.array(0.5), 3), ember.grad(power)(
        np.array(0.5), 3))


def test_checkpoint_in_a_graph_inlines(x64):
    graph = ember.make_graph(ember.checkpoint(lambda x: jnp.sin(x) * 2))(np.ones(2))
    assert [e.prim.name for e in graph.eqns] == ["checkpoint"]
    assert [e.prim.name for e in inline_calls(graph).eqns] == ["sin", "broadcast_in_dim", "mul"]
    np.testing.assert_allclose(ember.jit(ember.checkpoint(jnp.sin))(np.ones(2)), np.sin(1.0))


def _block(w1, w2, h):
    return h + jnp.tanh(h @ w1) @ w2


def _blocks_loss(params, x, remat):
    h = x
    for w1, w2 in params:
        h = ember.checkpoint(_block)(w1, w2, h) if remat else _block(w1, w2, h)
    return jnp.sum(h * h)


# CUDA plans device memory with the same code as OpenCL (ember/backends/gpu)
@pytest.mark.parametrize("backend_name", [b for b in ("reference", "cpu", "opencl")
                                          if b in available_backends()])
def test_checkpoint_lowers_compiled_peak_memory(backend_name):
    """Residual blocks with a 4x wide hidden layer: without remat the backward pass keeps
    every hidden activation; with it, only each block's input (the compiling backends
    fuse and keep less to begin with, but the wide activations still go)."""
    rng = np.random.default_rng(0)
    params = [((rng.standard_normal((32, 128)) * 0.1).astype(np.float32),
               (rng.standard_normal((128, 32)) * 0.1).astype(np.float32)) for _ in range(8)]
    x = rng.standard_normal((256, 32)).astype(np.float32)
    grad = ember.jit(ember.grad(_blocks_loss), static_argnums=2, backend=backend_name)
    plain, remat = (grad.lower(params, x, r).compile().memory_analysis()["peak_bytes"]
                    for r in (False, True))
    hidden = 256 * 128 * 4  # one block's wide activation
    assert remat < plain - 4 * hidden
