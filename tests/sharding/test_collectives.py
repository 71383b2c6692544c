"""Collective semantics on 8 CPU devices: arange(8) sharded over P('i'), on every
backend, eagerly and under jit; gradients against numerical ones."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P, lax
from ember.test_util import check_grads

X = np.arange(8, dtype=np.float32)
SHIFT = [(j, (j + 1) % 8) for j in range(8)]


def _both(f):
    """``f`` eagerly and under jit: the same values."""
    return [f, ember.jit(f)]


def smap(mesh, body, in_specs=P("i"), out_specs=P("i")):
    return ember.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


@pytest.mark.parametrize("jitted", [False, True])
def test_psum_is_28_everywhere_and_axis_index_counts(mesh8, jitted):
    wrap = ember.jit if jitted else (lambda f: f)
    total = wrap(smap(mesh8, lambda a: lax.psum(a, "i")))(X)
    np.testing.assert_array_equal(total, np.full(8, 28.0))
    index = wrap(smap(mesh8, lambda a: lax.axis_index("i")[None]))(X)
    np.testing.assert_array_equal(index, np.arange(8))
    assert np.asarray(index).dtype == np.int32


@pytest.mark.parametrize("jitted", [False, True])
def test_ppermute_by_one(mesh8, jitted):
    wrap = ember.jit if jitted else (lambda f: f)
    shifted = wrap(smap(mesh8, lambda a: lax.ppermute(a, "i", SHIFT)))(X)
    np.testing.assert_array_equal(shifted, [7, 0, 1, 2, 3, 4, 5, 6])
    # Shards nobody sends to receive zeros.
    partial = smap(mesh8, lambda a: lax.ppermute(a, "i", [(0, 3), (5, 1)]))(X)
    np.testing.assert_array_equal(partial, [0, 5, 0, 0, 0, 0, 0, 0])


def test_all_gather_tiled_and_stacked(mesh8):
    tiled = smap(mesh8, lambda a: lax.all_gather(a, "i", tiled=True))(X)
    assert tiled.shape == (64,)
    np.testing.assert_array_equal(tiled, np.tile(X, 8))
    stacked = smap(mesh8, lambda a: lax.all_gather(a, "i"), out_specs=P("i"))(X)
    assert stacked.shape == (64, 1)
    np.testing.assert_array_equal(stacked[:8, 0], X)


def test_psum_scatter_of_tiled_values_gives_28_each(mesh8):
    out = smap(mesh8, lambda a: lax.psum_scatter(jnp.tile(a, 8), "i", tiled=True))(X)
    np.testing.assert_array_equal(out, np.full(8, 28.0))
    untiled = smap(mesh8, lambda a: lax.psum_scatter(jnp.tile(a, 8), "i")[None])(X)
    np.testing.assert_array_equal(untiled, np.full(8, 28.0))


def test_all_to_all_there_and_back_is_the_identity(mesh8):
    z = np.arange(64, dtype=np.float32).reshape(8, 8)
    there = smap(mesh8, lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True),
                 P("i"), P(None, "i"))
    back = smap(mesh8, lambda a: lax.all_to_all(a, "i", 0, 1, tiled=True),
                P(None, "i"), P("i"))
    np.testing.assert_array_equal(back(there(z)), z)
    # Shard j receives column j: stacking the shards along rows gives z transposed.
    columns = smap(mesh8, lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True))(z)
    np.testing.assert_array_equal(columns.reshape(8, 8), z.T)


def test_reductions_pmean_pmax_pmin(mesh8):
    y = np.array([3, -1, 4, 1, -5, 9, 2, 6], np.float32)
    for fn, want in ((lax.pmean, y.mean()), (lax.pmax, y.max()), (lax.pmin, y.min())):
        out = smap(mesh8, lambda a, fn=fn: fn(a, "i"), out_specs=P())(y)
        np.testing.assert_allclose(out, [want], rtol=1e-6)


def test_two_axes_of_a_4x2_mesh(mesh42):
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    blocks = x.reshape(4, 2, 2, 2).transpose(0, 2, 1, 3)  # [data, model, 2, 2]
    both = smap(mesh42, lambda a: lax.psum(a, ("data", "model")),
                P("data", "model"), P())(x)
    np.testing.assert_array_equal(both, blocks.sum(axis=(0, 1)))
    rows = smap(mesh42, lambda a: lax.psum(a, "model"), P("data", "model"), P("data"))(x)
    np.testing.assert_array_equal(rows, blocks.sum(axis=1).reshape(8, 2))
    index = smap(mesh42, lambda a: lax.axis_index(("data", "model")).reshape(1, 1),
                 P("data", "model"), P("data", "model"))(x)
    np.testing.assert_array_equal(index, np.arange(8).reshape(4, 2))
    assert lax.axis_size is not None
    sizes = smap(mesh42, lambda a: jnp.full((1, 1), lax.axis_size("data") * 10
                                            + lax.axis_size("model")),
                 P("data", "model"), P("data", "model"))(x)
    np.testing.assert_array_equal(sizes, np.full((4, 2), 42))


def test_collectives_under_vmap_with_an_axis_name():
    y = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(ember.vmap(lambda a: lax.psum(a, "b"), axis_name="b")(y),
                                  np.full(6, 15.0))
    np.testing.assert_array_equal(
        ember.vmap(lambda a: a - lax.pmean(a, "b"), axis_name="b")(y), y - y.mean())
    np.testing.assert_array_equal(
        ember.vmap(lambda a: lax.axis_index("b"), axis_name="b")(y), np.arange(6))


def test_one_program_whatever_the_device_count(backend):
    """The traced program over 2 devices and over 8 has the same equations: compile
    time does not grow with the device count."""
    def graph(n):
        mesh = ember.make_mesh((n,), ("i",), devices=ember.devices("reference")[:n])
        body = lambda a: lax.ppermute(a * lax.psum(a, "i"), "i", [(0, 1)])  # noqa: E731
        return ember.make_graph(smap(mesh, body))(np.zeros(16, np.float32))

    two, eight = graph(2), graph(8)
    assert [e.prim.name for e in two.eqns] == [e.prim.name for e in eight.eqns]


# --- gradients ---------------------------------------------------------------------------

def _check(mesh, body, x, in_specs=P("i"), out_specs=P("i")):
    f = smap(mesh, body, in_specs, out_specs)
    check_grads(lambda v: jnp.sum(jnp.sin(f(v))), (x,), order=1)


@pytest.fixture
def x64_mesh(x64):
    return ember.make_mesh((4,), ("i",), devices=ember.devices("reference")[:4])


def test_gradients_of_collectives_match_numerical_ones(x64_mesh):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4))
    mesh = x64_mesh
    _check(mesh, lambda a: a * lax.psum(a, "i"), x)
    _check(mesh, lambda a: a * lax.pmean(a * a, "i"), x)
    _check(mesh, lambda a: lax.all_gather(a, "i", tiled=True) ** 2, x)
    _check(mesh, lambda a: lax.all_gather(a, "i", axis=1) * 2.0, x)
    _check(mesh, lambda a: lax.psum_scatter(jnp.cos(a), "i", scatter_dimension=1, tiled=True),
           x)
    _check(mesh, lambda a: a * lax.ppermute(a, "i", [(0, 2), (2, 3), (3, 0)]), x)
    _check(mesh, lambda a: lax.all_to_all(a * a, "i", 1, 0, tiled=True), x)
    _check(mesh, lambda a: lax.all_to_all(a.reshape(2, 4, 1), "i", 1, 0), x)


def test_gradient_inside_shard_map_of_a_replicated_parameter_is_summed(x64_mesh):
    """As JAX 0.10 with check_vma: with pmean in the loss, the per-shard gradient of a
    P() parameter is already the gradient of the global mean."""
    rng = np.random.default_rng(1)
    w, x = rng.normal(size=(3,)), rng.normal(size=(8, 3))
    loss = lambda w, x: jnp.mean(jnp.tanh(x @ w) ** 2)  # noqa: E731

    def body(w, xs):
        return ember.grad(lambda w: lax.pmean(loss(w, xs), "i"))(w)

    inside = smap(x64_mesh, body, (P(), P("i")), P())(w, x)
    np.testing.assert_allclose(inside, ember.grad(loss)(w, x), rtol=1e-10)
    # psum of it would be the mistake: 4 times too large.
    wrong = smap(x64_mesh, lambda w, xs: lax.psum(body(w, xs), "i"), (P(), P("i")), P())(w, x)
    np.testing.assert_allclose(wrong, 4 * np.asarray(inside), rtol=1e-10)


def test_collectives_inside_jit_and_control_flow_in_the_body(mesh8):
    """Bodies of cond / fori_loop and jitted functions see the mesh axis too."""
    in_jit = smap(mesh8, ember.jit(lambda a: lax.psum(a, "i")))(X)
    np.testing.assert_array_equal(in_jit, np.full(8, 28.0))
    looped = smap(mesh8, lambda a: lax.fori_loop(0, 3, lambda i, c: c + lax.psum(a, "i"), a))
    np.testing.assert_array_equal(looped(X), X + 84)
    branched = smap(mesh8, lambda a: lax.cond(a[0] > 3, lambda: lax.psum(a, "i"),
                                              lambda: -a))
    np.testing.assert_array_equal(branched(X), np.where(X > 3, 28.0, -X))
    np.testing.assert_array_equal(ember.grad(lambda v: looped(v).sum())(X), np.full(8, 25.0))
    stacked = ember.vmap(smap(mesh8, lambda a: lax.psum(a, "i"), out_specs=P()))(
        np.ones((3, 8), np.float32))
    np.testing.assert_array_equal(stacked, np.full((3, 1), 8.0))


@pytest.mark.parametrize("body", [
    lambda a: lax.all_gather(a, "i", axis=1, tiled=True),
    lambda a: lax.psum_scatter(a, "i", scatter_dimension=1, tiled=True),
    lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True),
    lambda a: lax.ppermute(a, "i", SHIFT) * lax.pmax(a, "i"),
], ids=["all_gather", "psum_scatter", "all_to_all", "ppermute_pmax"])
def test_vmap_of_shard_map_equals_a_loop(mesh8, body):
    """Collectives batched over an axis that is not theirs (their ordinary batch rule)."""
    xs = np.random.default_rng(2).normal(size=(3, 8, 16)).astype(np.float32)
    f = smap(mesh8, body)
    np.testing.assert_allclose(ember.vmap(f)(xs), np.stack([f(x) for x in xs]), rtol=1e-6)
    np.testing.assert_allclose(ember.vmap(f, in_axes=2, out_axes=1)(xs.transpose(1, 2, 0)),
                               np.stack([f(x) for x in xs], axis=1), rtol=1e-6)


def test_a_named_vmap_inside_shard_map(mesh8):
    """Two named axes at once: the mesh's 'i' and a vmap's 'b'."""
    xs = np.arange(24, dtype=np.float32).reshape(8, 3)
    body = lambda a: ember.vmap(lambda r: lax.psum(r, "b") + lax.psum(r, "i"),  # noqa: E731
                                in_axes=1, out_axes=1, axis_name="b")(a)
    out = smap(mesh8, body)(xs)
    np.testing.assert_allclose(out, xs.sum(1, keepdims=True) + xs.sum(0, keepdims=True))
