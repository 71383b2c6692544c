"""Training across processes equals the one-process run: data-parallel, tensor-parallel
on a 2-D mesh (data x model) and fully sharded (FSDP: all_gather of the parameters,
psum_scatter of their gradients); the split of 8 shards among processes does not change
a bit; checkpoints reshard across process counts; multihost_utils across processes.
Three runs, shared by every test here."""
from __future__ import annotations


import numpy as np
import pytest

from tests.distributed.conftest import needs_mpi, run_layouts


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    needs_mpi()
    folder = tmp_path_factory.mktemp("training")
    checkpoint = str(folder / "checkpoint")
    return run_layouts(folder, "train_mlp.py", {"1x8": (1, 8), "2x4": (2, 4), "4x2": (4, 2)},
                       args={"2x4": ("--save", checkpoint), "4x2": ("--restore", checkpoint)},
                       keep_output=True)


def _losses(result) -> np.ndarray:
    return np.array([float.fromhex(v) for v in result["losses"]], np.float32)


@pytest.mark.parametrize("split", ["2x4", "4x2"])
def test_processes_train_as_one(runs, split):
    one = _losses(runs["1x8"])
    assert len(one) == 20 and one[-1] < one[0]  # it trains
    np.testing.assert_allclose(_losses(runs[split]), one, rtol=1e-5)
    for name, value in runs["1x8"]["params"].items():
        np.testing.assert_allclose(runs[split]["params"][name], value, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("split", ["2x4", "4x2"])
@pytest.mark.parametrize("model", ["tensor_parallel", "fsdp"])
def test_sharded_models_train_as_one(runs, split, model):
    one, many = runs["1x8"]["sharded"][model], runs[split]["sharded"][model]
    np.testing.assert_allclose(_losses(many), _losses(one), rtol=1e-5)
    np.testing.assert_allclose(_losses(many), _losses(runs["1x8"]), rtol=1e-5)  # same MLP
    for name, value in one["params"].items():
        np.testing.assert_allclose(many["params"][name], value, rtol=1e-5, atol=1e-7)


def test_split_among_processes_is_bitwise_deterministic(runs):
    assert runs["2x4"]["losses"] == runs["4x2"]["losses"]
    assert runs["2x4"]["params"] == runs["4x2"]["params"]
    for model in ("tensor_parallel", "fsdp"):
        assert runs["2x4"]["sharded"][model] == runs["4x2"]["sharded"][model]


def test_output_lines_carry_their_rank(runs):
    lines = runs["4x2"]["output"].splitlines()
    assert {line.split("]")[0] for line in lines if "final loss" in line} == {
        f"[rank {r}" for r in range(4)}


def test_checkpoint_of_two_processes_restores_on_four(runs):
    assert runs["4x2"]["restored_equal"] is True  # and the data blocks (asserted inside)


def test_multihost_utils_across_processes(runs):
    for name, count in (("2x4", 2), ("4x2", 4)):
        utilities = runs[name]["utilities"]
        assert utilities["allgather_global"] is True
        assert utilities["allgather_ranks"] == list(range(count))
        assert utilities["broadcast"] == [0, 0, 0]
