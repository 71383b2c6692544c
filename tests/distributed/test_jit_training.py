"""Training through ``jit`` with sharded inputs (the SPMD partitioner) across processes
equals the one-process run: 1 process x 4 devices, 2 x 2 and 4 x 1. Data-parallel
through sharded arguments and through ``in_shardings`` (the partitioner inserts one
all-reduce, run as one host step across processes), FSDP, and tensor-parallel on a
2 x 2 mesh. 2 x 2 and 4 x 1 are bitwise equal: every cross-process sum adds the shards
in their global order (and the tensor-parallel sum over 'model', inside each process
in 2 x 2, adds two shards, which has one order); against one process, whose sums over
its 4 devices run in the compiled program, float32 rounding (rtol 1e-5). Three runs,
shared by every test here."""
from __future__ import annotations


import numpy as np
import pytest

from tests.distributed.conftest import needs_mpi, run_layouts

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    needs_mpi()
    return run_layouts(tmp_path_factory.mktemp("jit_training"), "train_jit.py",
                       {"1x4": (1, 4), "2x2": (2, 2), "4x1": (4, 1)})


def _losses(run) -> np.ndarray:
    return np.array([float.fromhex(v) for v in run["losses"]], np.float32)


WAYS = ["arguments", "in_shardings", "fsdp", "tensor_parallel"]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("split", ["2x2", "4x1"])
def test_processes_train_as_one_process(runs, split, way):
    one, many = runs["1x4"][way], runs[split][way]
    assert len(_losses(one)) >= 10 and _losses(one)[-1] < _losses(one)[0]  # it trains
    np.testing.assert_allclose(_losses(many), _losses(one), rtol=RTOL, atol=ATOL)
    for name, value in one["params"].items():
        np.testing.assert_allclose(many["params"][name], value, rtol=RTOL, atol=ATOL)


def test_split_among_processes_is_bitwise_deterministic(runs):
    for way in WAYS:
        assert runs["2x2"][way]["losses"] == runs["4x1"][way]["losses"]
        assert runs["2x2"][way]["params"] == runs["4x1"][way]["params"]


@pytest.mark.parametrize("way", ["arguments", "in_shardings"])
def test_one_all_reduce_per_step_is_one_host_step(runs, way):
    counts = {name: dict(run[way]["counts"]) for name, run in runs.items()}
    for name, run in runs.items():  # the ahead-of-time compiled program runs too
        assert counts[name].pop("compiled_first_loss") == run[way]["losses"][0]
    assert counts["1x4"] == {"partitioner": {"all-reduce": 1}, "host_steps": {}}
    for split in ("2x2", "4x1"):  # loss and both gradients in one collective
        assert counts[split] == {"partitioner": {"all-reduce": 1},
                                 "host_steps": {"process_sum": 1}}


def test_a_replicated_result_is_whole_on_every_process(runs):
    assert all(run["sharded_loss_shape"] == [] for run in runs.values())


def test_a_split_whose_shards_are_not_contiguous_is_a_clear_error(runs):
    message = runs["2x2"]["unsupported"]
    assert "jit of tanh: argument leaf 0, split as P(('data', 'model'),)" in message
    assert "do not form one block" in message and "over one mesh axis" in message
