"""Sharding rules and propagation: every primitive has a rule (or says why not), and
small graphs in give the splits out that the rules and the documented priority say."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.random  # noqa: F401  (registers its primitives)
from ember import P, lax
from ember.core.abstract import ShapedArray
from ember.core.primitive import REGISTRY
from ember.core.staging import trace_to_graph
from ember.sharding.partitioner import partition
from ember.sharding.partitioner.propagation import propagate
from ember.transforms import custom, custom_vmap, remat  # noqa: F401  (register primitives)

MESH = {"i": 8, "j": 2}


def test_every_primitive_has_a_sharding_rule_or_says_why_not():
    missing = sorted(name for name, prim in REGISTRY.items()
                     if prim.sharding_rule is None and not prim.waived.get("sharding"))
    assert missing == [], f"primitives without a sharding rule or waiver: {missing}"


def _graph(fun, *shapes):
    return trace_to_graph(lambda *xs: [fun(*xs)],
                          [ShapedArray(s, np.dtype(np.float32)) for s in shapes])


def _out(graph, fixed_inputs, fixed_outputs=None):
    fixed = {v: d for v, d in zip(graph.inputs, fixed_inputs) if d is not None}
    for atom, dims in zip(graph.outputs, fixed_outputs or []):
        if dims is not None:
            fixed[atom] = dims
    specs = propagate(graph, MESH, fixed)
    return specs, [specs[a] for a in graph.outputs], [specs[v] for v in graph.inputs]


def test_elementwise_splits_spread_to_operands_and_results():
    g = _graph(lambda x, y: jnp.exp(x) * y, (16, 4), (16, 4))
    _, outs, ins = _out(g, [(("i",), ()), None])
    assert outs == [(("i",), ())] and ins[1] == (("i",), ())


def test_a_whole_annotation_does_not_spread_but_a_split_does():
    g = _graph(lambda x, y: x + y, (16, 4), (16, 4))
    _, outs, _ = _out(g, [((), ()), ((), ("j",))])
    assert outs == [((), ("j",))]


def test_dot_general_carries_free_dimensions_and_leaves_contracting_ones_partial():
    g = _graph(lambda x, w: x @ w, (16, 8), (8, 4))
    _, outs, ins = _out(g, [(("i",), ()), None])
    assert outs == [(("i",), ())] and ins[1] == ((), ())
    program = partition(g, _mesh(), [((), ("i",)), (("i",), ())], [None])
    assert [c.kind for c in program.collectives] == ["all-reduce"]
    assert program.out_specs == [P()]


def test_splits_propagate_backward_from_an_annotated_result():
    g = _graph(lambda x, w: jnp.tanh(x @ w), (16, 8), (8, 4))
    _, _, ins = _out(g, [None, None], [((), ("j",))])
    assert ins[1] == ((), ("j",))  # through tanh, then the result's free dimension


def test_reductions_keep_kept_dimensions_and_reduce_split_ones_partially():
    g = _graph(lambda x: jnp.sum(x, axis=1), (16, 8))
    _, outs, _ = _out(g, [(("j",), ("i",))])
    assert outs == [(("j",),)]
    program = partition(g, _mesh(), [(("j",), ("i",))], [None])
    assert [(c.kind, c.axis) for c in program.collectives] == [("all-reduce", "i")]


def test_transpose_and_reshape_move_splits_with_their_dimensions():
    g = _graph(lambda x: x.T, (16, 8))
    assert _out(g, [(("i",), ())])[1] == [((), ("i",))]
    merged = _graph(lambda x: x.reshape(128), (16, 8))
    assert _out(merged, [(("i",), ())])[1] == [(("i",),)]
    split = _graph(lambda x: x.reshape(16, 2, 4), (16, 8))
    assert _out(split, [(("i",), ())])[1] == [(("i",), (), ())]
    # a split of a minor dimension does not survive a merge: the result stays whole
    assert _out(merged, [((), ("j",))])[1] == [((),)]


def test_slices_and_concatenation_keep_their_moving_dimension_whole():
    g = _graph(lambda x: lax.slice(x, (0, 2), (16, 6)), (16, 8))
    assert _out(g, [(("i",), ("j",))])[1] == [(("i",), ())]
    cat = _graph(lambda x, y: jnp.concatenate([x, y], axis=1), (16, 4), (16, 4))
    assert _out(cat, [(("i",), ("j",)), None])[1] == [(("i",), ())]


def test_a_mesh_axis_splits_at_most_one_dimension():
    g = _graph(lambda x, y: x + y.T, (8, 8), (8, 8))
    _, outs, _ = _out(g, [(("i",), ()), (("i",), ())])
    assert outs == [(("i",), ())]  # x's split comes first; y.T's would reuse 'i'


def test_an_uneven_dimension_is_not_split():
    g = _graph(lambda x, y: x + y, (16, 6), (16, 6))
    _, _, ins = _out(g, [(("i",), ()), None])
    assert ins[1] == (("i",), ())
    odd = _graph(lambda x: jnp.sum(x, axis=0), (16, 6))
    # the result (6,) cannot be split over 'i' (8): nothing is proposed for it
    assert _out(odd, [None], [(None,)])[2] == [((), ())]


def test_annotations_win_over_propagation():
    g = _graph(lambda x: lax.with_sharding_constraint(jnp.sin(x), _named(P(None, "i"))),
               (16, 8))
    specs, outs, _ = _out(g, [(("i",), ())])
    sin_out = g.eqns[0].outputs[0]
    assert specs[sin_out] == (("i",), ())  # forward from the argument first
    assert outs == [((), ("i",))]  # the constraint holds exactly
    program = partition(g, _mesh(), [(("i",), ())], [None])
    assert [c.kind for c in program.collectives] == ["all-to-all"]


def test_propagation_reaches_a_fixed_point_on_a_chain():
    def chain(x, w):
        for _ in range(4):
            x = jnp.tanh(x @ w)
        return x
    g = _graph(chain, (16, 16), (16, 16))
    specs, outs, _ = _out(g, [None, None], [(("i",), ())])
    assert all(specs[e.outputs[0]][0] == ("i",) for e in g.eqns if e.prim.name == "tanh")


def _mesh():
    return ember.make_mesh((8, 2), ("i", "j"), devices=ember.devices("reference"))


def _named(spec):
    from ember.sharding import NamedSharding

    return NamedSharding(_mesh(), spec)


@pytest.fixture(autouse=True)
def _sixteen_devices():
    with ember.config.override(num_cpu_devices=16):
        yield


def test_broadcasts_carry_splits_of_kept_dimensions_only():
    g = _graph(lambda b: jnp.broadcast_to(b, (16, 8)), (8,))
    assert _out(g, [(("i",),)])[1] == [((), ("i",))]
    ones = _graph(lambda b: jnp.broadcast_to(b, (16, 8)), (1, 8))
    # a stretched size-1 dimension cannot keep a split; the result's split comes back
    assert _out(ones, [None], [(("i",), ())])[2] == [((), ())]


def test_primitives_without_a_rule_run_on_whole_operands():
    mesh = ember.make_mesh((8,), ("i",), devices=ember.devices("reference")[:8])
    rows = ember.sharding.NamedSharding(mesh, P("i"))
    x = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)

    def f(x):
        y = jnp.sort(x * 2, axis=0)  # sort has no sharding rule (waived)
        return lax.cond(jnp.sum(y) > 0, lambda v: v + 1, lambda v: v - 1, y)

    jitted = ember.jit(f, in_shardings=rows, out_shardings=rows)
    np.testing.assert_allclose(jitted(x), ember.jit(f)(x), rtol=1e-6)
    kinds = [c.kind for c in jitted.lower(x).compile().spmd_program.collectives]
    assert kinds == ["all-gather"]  # x * 2 is split; sort needs it whole


def test_the_program_does_not_grow_with_the_number_of_devices():
    def step(x, w):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    sizes = []
    for n in (2, 8):
        mesh = ember.make_mesh((n,), ("i",), devices=ember.devices("reference")[:n])
        rows = ember.sharding.NamedSharding(mesh, P("i"))
        lowered = ember.jit(step, in_shardings=(rows, None)).lower(
            np.ones((16, 8), np.float32), np.ones((8, 8), np.float32))
        sizes.append(len(lowered.graph.eqns))
    assert sizes[0] == sizes[1]  # one program; the device count is a batch size in it
