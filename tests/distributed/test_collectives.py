"""Every collective over mesh axes that cross processes gives, bit for bit, what one
process of 8 devices gives: all_to_all (tiled and not, on 1-D and 2-D meshes, and its
gradient from inside and outside shard_map) among them, and sums and gathers both of
data small enough to travel with the processes' meeting and of larger data, and
collectives bucketed in a loop body."""
from __future__ import annotations


import numpy as np
import pytest

from tests.distributed.conftest import needs_mpi, run_layouts


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    needs_mpi()
    return run_layouts(tmp_path_factory.mktemp("collectives"), "collectives.py",
                       {"1x8": (1, 8), "2x4": (2, 4), "4x2": (4, 2)})


def test_all_to_all_semantics_in_one_process(runs):
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    one = {k: np.array(v, np.float32) for k, v in runs["1x8"].items() if isinstance(v, list)}
    np.testing.assert_array_equal(one["all_to_all_identity"], x)
    np.testing.assert_array_equal(one["all_to_all_round_trip"], x)
    # shard i's chunk j lands in shard j, at place i
    expected = x.reshape(8, 8, 2).transpose(1, 0, 2).reshape(64, 2)
    np.testing.assert_array_equal(one["all_to_all_tiled"], expected)
    np.testing.assert_array_equal(one["all_to_all_grad"], one["all_to_all_grad_outside"])


@pytest.mark.parametrize("split", ["2x4", "4x2"])
def test_collectives_across_processes_are_bitwise_the_one_process_ones(runs, split):
    assert sorted(runs[split]) == sorted([*runs["1x8"], "host_steps"])
    for name, value in runs["1x8"].items():
        assert runs[split][name] == value, name


@pytest.mark.parametrize("split", ["2x4", "4x2"])
def test_pmax_pmin_and_sums_in_a_loop_body_are_bucketed(runs, split):
    # (depth, primitive, operands): the loop body's two psums and two pmaxes become one
    # collective each; after the loop, the two pmaxes one and the pmin its own
    assert runs[split]["host_steps"] == ["0 process_extrema 2", "0 process_extremum 1",
                                         "1 process_extrema 2", "1 process_sums 2"]
