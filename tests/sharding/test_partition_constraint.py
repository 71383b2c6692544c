"""``lax.with_sharding_constraint`` and what a partitioned ``jit`` explains: its
collectives with the user's line and cause, and the bytes each device sends."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P, lax
from ember.errors import EmberValueError
from ember.sharding import NamedSharding
from ember.test_util import check_grads

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture
def mesh():
    return ember.make_mesh((8,), ("i",), devices=ember.devices("reference"))


def _kinds(compiled):
    return [c.kind for c in compiled.spmd_program.collectives]


def test_a_constraint_reshards_between_dimensions_with_an_all_to_all(mesh):
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    xs = ember.device_put(x, NamedSharding(mesh, P("i")))
    f = ember.jit(lambda x: lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P(None, "i"))))
    out = f(xs)
    np.testing.assert_array_equal(out, x * 2)
    assert out.sharding == NamedSharding(mesh, P(None, "i"))
    assert _kinds(f.lower(xs).compile()) == ["all-to-all"]


def test_a_constraint_takes_a_partition_spec_under_set_mesh(mesh):
    x = np.ones((16, 8), np.float32)
    with ember.set_mesh(mesh):
        f = ember.jit(lambda x: lax.with_sharding_constraint(jnp.sin(x), P("i")))
        out = f(x)
    np.testing.assert_allclose(out, np.sin(x), rtol=RTOL)
    assert out.sharding.spec == P("i")


def test_a_constraint_outside_jit_reshards_at_once(mesh):
    x = np.arange(16, dtype=np.float32)
    out = lax.with_sharding_constraint(x, NamedSharding(mesh, P("i")))
    assert out.sharding == NamedSharding(mesh, P("i"))
    assert [s.data.shape for s in out.addressable_shards] == [(2,)] * 8


def test_an_uneven_constraint_is_an_error_naming_dimension_size_and_axis(mesh):
    f = ember.jit(lambda x: lax.with_sharding_constraint(x, NamedSharding(mesh, P("i"))))
    with pytest.raises(EmberValueError, match=r"dimension 0 of size 10.*'i' \(size 8\)"):
        f(np.zeros((10, 4), np.float32))


def test_a_constraint_naming_an_unknown_axis_is_an_error(mesh):
    with ember.set_mesh(mesh):
        with pytest.raises(EmberValueError, match="mesh axis 'model'"):
            ember.jit(lambda x: lax.with_sharding_constraint(x, P("model")))(np.zeros(8))


def test_a_constraint_is_the_identity_under_grad_and_vmap(mesh, x64):
    sharding = NamedSharding(mesh, P("i"))
    f = lambda x: jnp.sum(jnp.sin(lax.with_sharding_constraint(x, sharding)) ** 2)  # noqa: E731
    x = np.linspace(-1, 1, 16)
    check_grads(f, (x,), order=2)
    batched = ember.vmap(lambda x: lax.with_sharding_constraint(x * 3, sharding))(
        np.ones((3, 16)))
    np.testing.assert_array_equal(batched, np.full((3, 16), 3.0))
    grad = ember.jit(ember.grad(f))(x)
    np.testing.assert_allclose(grad, 2 * np.sin(x) * np.cos(x), rtol=1e-12)


def test_in_shardings_that_differ_from_an_arguments_own_sharding_are_an_error(mesh):
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    xs = ember.device_put(x, NamedSharding(mesh, P("i")))
    f = ember.jit(lambda x: x + 1, in_shardings=NamedSharding(mesh, P()))
    with pytest.raises(EmberValueError, match="differs from its in_shardings"):
        f(xs)
    assert f.lower(x).compile().spmd_program.in_specs == [P()]
    same = ember.jit(lambda x: x + 1, in_shardings=NamedSharding(mesh, P("i")))
    np.testing.assert_array_equal(same(xs), x + 1)


def test_in_shardings_must_split_evenly(mesh):
    f = ember.jit(lambda x: x, in_shardings=NamedSharding(mesh, P("i")))
    with pytest.raises(EmberValueError, match=r"argument leaf 0.*dimension 0 of size 12"):
        f(np.zeros((12,), np.float32))


def test_as_text_lists_each_collective_with_the_users_line_and_its_cause(mesh):
    rows = NamedSharding(mesh, P("i"))
    x = np.ones((16, 8), np.float32)
    w = np.ones((8, 8), np.float32)

    def layer(x, w):
        h = jnp.tanh(x @ w)
        return lax.with_sharding_constraint(h, NamedSharding(mesh, P())), jnp.sum(h)

    line = inspect.getsourcelines(layer)[1] + 1
    compiled = ember.jit(layer, in_shardings=(rows, None)).lower(x, w).compile()
    text = compiled.as_text()
    assert "all-gather over 'i' of float32[16,8]" in text
    assert f"test_partition_constraint.py:{line + 1}" in text  # the constraint's line
    assert "operand 0 of sharding_constraint is P('i', None), needed as P(None, None)" in text
    assert "all-reduce over 'i' of float32[]" in text and "partial sums" in text
    assert "psum[axis_name='i']" in text  # the per-device program itself
    cost = compiled.cost_analysis()
    # all-gather: 7/8 of a 16x8 float32 result; all-reduce: 2 * 7/8 of one float32
    assert cost["bytes communicated per device"] == pytest.approx(7 / 8 * 512 + 2 * 7 / 8 * 4)


def test_an_unsharded_jit_is_not_partitioned():
    compiled = ember.jit(lambda x: x * 2).lower(np.ones(4, np.float32)).compile()
    assert compiled.spmd_program is None
    assert "bytes communicated per device" not in compiled.cost_analysis()


def test_repeated_calls_reuse_the_one_partitioned_program(mesh):
    rows = NamedSharding(mesh, P("i"))
    f = ember.jit(lambda x: jnp.sum(x * x), in_shardings=rows)
    for _ in range(3):
        np.testing.assert_allclose(f(np.arange(16, dtype=np.float32)), 1240.0)
    assert f._cache_size() == 1


def test_a_jit_with_shardings_inside_a_jit_constrains_its_arguments_and_results(mesh):
    rows, cols = NamedSharding(mesh, P("i")), NamedSharding(mesh, P(None, "i"))
    inner = ember.jit(lambda x: x * 2, in_shardings=rows, out_shardings=cols)
    outer = ember.jit(lambda x: inner(x) + 1)
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    out = outer(x)
    np.testing.assert_array_equal(out, x * 2 + 1)
    assert out.sharding == cols  # propagated from the inner jit's out_shardings
    assert _kinds(outer.lower(x).compile()) == ["all-to-all"]


def test_ember_dump_writes_the_partitioners_stage(mesh, tmp_path):
    rows = NamedSharding(mesh, P("i"))
    with ember.config.override(dump_dir=str(tmp_path)):
        ember.jit(lambda x: jnp.sum(x), in_shardings=rows)(np.ones(16, np.float32))
    folder, = tmp_path.glob("*-lambda.partition")
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["0000-input.txt", "0001-spmd.txt", "0002-global_program.txt"]
    assert "all-reduce over 'i'" in (folder / "0001-spmd.txt").read_text()
