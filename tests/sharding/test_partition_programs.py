"""Partitioned programs equal the unpartitioned ones: small programs over every kind of
sharding rule, with inputs and outputs split in many ways on a (4, 2) mesh, so that
every conversion (all-gather, all-to-all, local slices, reduce-scatter, all-reduce of
sums, maxima and minima) runs."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P, lax
from ember.sharding import NamedSharding

PROGRAMS = {
    "elementwise": lambda x, y: jnp.exp(x) * y - 1.0,
    "matmul": lambda x, y: x @ y.T,
    "contract_both": lambda x, y: jnp.einsum("ab,ab->b", x, y),
    "batched_dot": lambda x, y: jnp.einsum("ab,ac->abc", x, y),
    "sum_rows": lambda x, y: jnp.sum(x, axis=0) + jnp.sum(y, axis=0),
    "max_min": lambda x, y: jnp.max(x, axis=1) - jnp.min(y, axis=1),
    "argmax": lambda x, y: jnp.argmax(x + y, axis=0).astype(np.float32),
    "mean_all": lambda x, y: jnp.mean(x * y),
    "transpose": lambda x, y: (x + y).T * 2,
    "reshape": lambda x, y: (x * y).reshape(4, 2, 16)[:, 1, :],
    "merge": lambda x, y: (x - y).reshape(128),
    "slice": lambda x, y: x[2:6, :] + y[:4, :],
    "concat": lambda x, y: jnp.concatenate([x, y], axis=1),
    "pad": lambda x, y: jnp.pad(x, ((1, 1), (0, 0))) + 1.0,
    "cumsum": lambda x, y: jnp.cumsum(x, axis=1) + y,
    "broadcast": lambda x, y: x[:, None, :] * y[None, :, :].sum(0, keepdims=True),
    "select": lambda x, y: jnp.where(x > y, x, y * 3),
    "rev": lambda x, y: jnp.flip(x, axis=0) + y,
    "dynamic_slice": lambda x, y: lax.dynamic_slice(x, (2, 0), (4, 16)) * y[:4],
    "softmax": lambda x, y: jax_softmax(x @ y.T),
}
SPECS = [P(), P("data"), P(None, "model"), P("data", "model"), P("model", "data"),
         P(("data", "model")), P(None, ("model", "data"))]


def jax_softmax(z):
    z = z - jnp.max(z, axis=-1, keepdims=True)
    e = jnp.exp(z)
    return e / jnp.sum(e, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def mesh():
    with ember.config.override(num_cpu_devices=8):
        yield ember.make_mesh((4, 2), ("data", "model"), devices=ember.devices("reference"))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_partitioned_program_equals_the_unpartitioned_one(name, mesh):
    rng = np.random.default_rng(len(name))
    x = rng.normal(size=(8, 16)).astype(np.float32)
    y = rng.normal(size=(8, 16)).astype(np.float32)
    fun = PROGRAMS[name]
    want = np.asarray(ember.jit(fun, backend="reference")(x, y))
    for k, (sx, sy) in enumerate(zip(SPECS, SPECS[3:] + SPECS[:3])):
        out_spec = [P(), None, SPECS[k % len(SPECS)]][k % 3]
        out = None if out_spec is None or len(out_spec) > want.ndim else \
            NamedSharding(mesh, out_spec)
        if out is not None:
            try:
                out.shard_shape(want.shape)
            except ember.errors.EmberValueError:
                out = None  # an uneven output split: leave it to the partitioner
        jitted = ember.jit(fun, in_shardings=(NamedSharding(mesh, sx), NamedSharding(mesh, sy)),
                           out_shardings=out, backend="reference")
        got = jitted(x, y)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} with inputs {sx}, {sy}, output {out_spec}")
        if out is not None:
            assert got.sharding == out


def test_a_custom_jvp_function_is_partitioned_through_its_body(mesh):
    """nn.softmax is a custom_jvp call, which has no sharding rule; its body has, so rows
    split over 'data' stay split (before, every device all-gathered the whole input)."""
    x = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
    rows = NamedSharding(mesh, P("data"))
    jitted = ember.jit(ember.nn.softmax, in_shardings=rows, out_shardings=rows,
                       backend="reference")
    assert jitted.lower(x).compile().spmd_program.collectives == []
    want = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(jitted(x)), want / want.sum(1, keepdims=True),
                               rtol=1e-6, atol=1e-7)
