"""Random bits as plain uint32 arithmetic (passes/threefry.py): the expansion gives the
reference's bits exactly, on every backend present, also inside control flow, and a
native backend runs them in its own kernels instead of a host call."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.ir.graph import all_eqns
from ember.ir.interpreter import eval_graph
from ember.passes.threefry import expand_threefry
from ember.runtime.devices import available_backends

NATIVE = [name for name in ("cpu", "opencl") if name in available_backends()]

rng = np.random.default_rng(11)
WORDS = [rng.integers(0, 2**32, (3, 257), dtype=np.uint64).astype(np.uint32) for _ in range(4)]
# the extremes of every word, where a signed shift or a carry would show
WORDS[0][0, :4] = WORDS[1][0, 4:8] = WORDS[2][0, 8:12] = WORDS[3][0, 12:16] = 0xFFFFFFFF


def prims(graph) -> set[str]:
    return {eqn.prim.name for eqn in graph.eqns}


def test_expansion_gives_the_reference_bits():
    graph = ember.make_graph(lax.threefry2x32)(*WORDS)
    expanded = expand_threefry(graph)
    assert "threefry2x32" in prims(graph) and "threefry2x32" not in prims(expanded)
    assert prims(expanded) <= {"add", "xor", "or", "shift_left", "shift_right_logical",
                               "broadcast_in_dim"}
    want = eval_graph(graph, WORDS)  # the primitive's NumPy implementation
    for got, expected in zip(eval_graph(expanded, WORDS), want):
        np.testing.assert_array_equal(np.asarray(got), expected)


@pytest.mark.parametrize("backend", NATIVE)
def test_native_bits_equal_the_reference(backend):
    got = ember.jit(lax.threefry2x32, backend=backend)(*WORDS)
    want = ember.jit(lax.threefry2x32, backend="reference")(*WORDS)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def dropout(key, x):
    keep = ember.random.bernoulli(key, 0.8, x.shape)
    return jnp.where(keep, x / 0.8, 0.0)


def in_a_loop(key, x):
    def body(i, carry):
        return carry + ember.random.normal(ember.random.fold_in(key, i), x.shape)
    return lax.fori_loop(0, 3, body, x)


def nested_prims(graph) -> set[str]:
    return {eqn.prim.name for eqn in all_eqns(graph)}


def test_expansion_reaches_loop_bodies():
    graph = ember.make_graph(in_a_loop)(ember.random.PRNGKey(3), np.ones((4, 5), np.float32))
    assert "threefry2x32" in nested_prims(graph)
    assert "threefry2x32" not in nested_prims(expand_threefry(graph))


@pytest.mark.parametrize("backend", NATIVE)
@pytest.mark.parametrize("fun", [dropout, in_a_loop])
def test_random_draws_match_the_reference(backend, fun):
    key, x = ember.random.PRNGKey(3), np.ones((64, 96), np.float32)
    compiled = ember.jit(fun, backend=backend).lower(key, x).compile()
    if fun is dropout:  # (a loop runs on the host, its body compiled)
        assert "host" not in [kernel.kind for kernel in compiled.kernels]
    got = np.asarray(compiled(key, x))
    want = np.asarray(ember.jit(fun, backend="reference")(key, x))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif("cpu" not in available_backends(), reason="no C compiler")
def test_a_dropout_mask_is_one_kernel_on_the_cpu():
    key, x = ember.random.PRNGKey(0), np.ones((256, 256), np.float32)
    kernels = ember.jit(dropout, backend="cpu").lower(key, x).compile().kernels
    assert [kernel.kind for kernel in kernels] == ["kernel"]
