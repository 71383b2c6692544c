"""The data-parallel steps of ``ember bench --sharded`` compile to the unsharded
steps' kernels: shard_map is one program over all shards, and each psum of a per-shard
sum is merged with it (passes/combine_sums.py) into the unsharded program's one sum."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.bench.sharded import batch_sizes, data_parallel_step, unsharded_step
from ember.bench.workloads import MLP_STEP, TRANSFORMER, mlp_loss, transformer_loss

RTOL, ATOL = 1e-5, 1e-6


def _inputs(workload=MLP_STEP):
    return workload.make_inputs(**batch_sizes(workload, "quick"))


def _sharded(devices: int, placed: bool, workload=MLP_STEP, loss=mlp_loss):
    """The bench's step over ``devices`` and its arguments: ``placed``, they carry their
    shardings (the partitioner runs, as in the bench), else plain arrays."""
    params, *batch = _inputs(workload)
    mesh = ember.make_mesh((devices,), ("data",), devices=ember.devices()[:devices])
    step = ember.jit(data_parallel_step(ember, loss, mesh, labelled=len(batch) == 2))
    if not placed:
        return step, (params, *batch)
    sharding, P = ember.sharding.NamedSharding, ember.sharding.PartitionSpec
    return step, (ember.device_put(params, sharding(mesh, P())),
                  *(ember.device_put(b, sharding(mesh, P("data"))) for b in batch))


def _kernels(step, args) -> list[list[str]]:
    return [kernel.ops for kernel in step.lower(*args).compile().kernels]


@pytest.fixture
def cpu():
    with ember.config.override(backend="cpu"):
        yield


@pytest.mark.parametrize("placed", [True, False], ids=["partitioned", "shard_map"])
@pytest.mark.parametrize("devices", [2, 8])
def test_the_sharded_step_has_the_unsharded_steps_kernels(cpu, devices, placed):
    unsharded = _kernels(ember.jit(unsharded_step(ember, mlp_loss)), _inputs())
    sharded = _kernels(*_sharded(devices, placed))
    # The (shards, batch, classes) view of the labels is read by many kernels: a view
    # costs nothing to recompute, so fusion reads through it instead of copying it.
    assert sharded.count([]) == 0 and unsharded.count([]) == 0
    assert len(sharded) == len(unsharded) == 16
    assert sum("dot_general" in ops for ops in sharded) == \
        sum("dot_general" in ops for ops in unsharded)


def test_the_sharded_transformer_step_has_the_unsharded_steps_kernels(cpu):
    # Each device's shard has a batch axis of size 1: the attention softmax stays one
    # row-wise kernel (a loop of extent 1 belongs to a reduction's rows).
    unsharded = _kernels(ember.jit(unsharded_step(ember, transformer_loss)),
                         _inputs(TRANSFORMER))
    sharded = _kernels(*_sharded(8, True, TRANSFORMER, transformer_loss))
    # (35: the GELU after the first MLP product is computed by the epilogue kernel that
    # stores its tanh for the backward, passes/fusion.py _merge_into_epilogues)
    assert len(sharded) == len(unsharded) == 35


@pytest.mark.parametrize("placed", [True, False], ids=["partitioned", "shard_map"])
def test_the_sharded_step_equals_the_unsharded_one_and_repeats_bit_for_bit(cpu, placed):
    step, args = _sharded(8, placed)
    first = [np.asarray(leaf) for leaf in ember.tree_util.tree_leaves(step(*args))]
    again = [np.asarray(leaf) for leaf in ember.tree_util.tree_leaves(step(*args))]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    with ember.config.override(backend="reference"):
        want = ember.jit(unsharded_step(ember, mlp_loss))(*_inputs())
    for got, expected in zip(first, ember.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(got, np.asarray(expected), rtol=RTOL, atol=ATOL)
