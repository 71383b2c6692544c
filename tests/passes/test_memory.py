"""Buffer assignment: arena reuse after the last read, in-place updates, donation."""
from __future__ import annotations

import numpy as np

from ember.core.abstract import ShapedArray
from ember.ir.graph import Var
from ember.passes.memory import Location, Step, plan_buffers


def var(n: int = 1024, dtype=np.float32) -> Var:
    return Var(ShapedArray((n,), np.dtype(dtype)))


def test_a_chain_reuses_two_buffers():
    x = var()
    values = [var() for _ in range(6)]
    steps, previous = [], x
    for value in values:
        steps.append(Step(reads=[previous], writes=[value]))
        previous = value
    plan = plan_buffers(steps, [x], [False], [values[-1]])
    assert plan.arena_bytes == 2 * 4096
    assert plan.locations[values[-1]] == Location("output", 0)


def test_live_values_never_share_memory():
    x, a, b, c = var(), var(), var(), var()
    steps = [Step([x], [a]), Step([x], [b]), Step([a, b], [c])]
    plan = plan_buffers(steps, [x], [False], [c])
    assert plan.locations[a] != plan.locations[b]


def test_in_place_update_when_the_input_dies():
    x, a, b, c = var(), var(), var(), var()
    steps = [Step([x], [a]), Step([a], [b], inplace=[(b, a)]), Step([b], [c])]
    plan = plan_buffers(steps, [x], [False], [c])
    assert plan.locations[b] == plan.locations[a]
    assert (b, a) in plan.in_place


def test_no_in_place_update_while_the_input_is_still_read():
    x, a, b, c = var(), var(), var(), var()
    steps = [Step([x], [a]), Step([a], [b], inplace=[(b, a)]), Step([a, b], [c])]
    plan = plan_buffers(steps, [x], [False], [c])
    assert plan.locations[b] != plan.locations[a]


def test_no_in_place_update_across_dtypes_or_sizes():
    x, a, b = var(), var(), var(dtype=np.int32)
    c = var(512)
    steps = [Step([x], [a]), Step([a], [b], inplace=[(b, a)]), Step([b], [c], inplace=[(c, b)])]
    plan = plan_buffers(steps, [x], [False], [c])
    assert plan.locations[b] != plan.locations[a]


def test_a_step_temporary_shares_the_fresh_buffer_of_its_result():
    x, gemm_out, result = var(), var(), var()
    steps = [Step([x], [gemm_out, result], inplace=[(result, gemm_out)])]
    plan = plan_buffers(steps, [x], [False], [result])
    assert plan.locations[gemm_out] == plan.locations[result] == Location("output", 0)
    assert plan.arena_bytes == 0


def test_a_step_result_read_later_keeps_its_own_buffer():
    x, gemm_out, result, later = var(), var(), var(), var()
    steps = [Step([x], [result, gemm_out], inplace=[(result, gemm_out)]),
             Step([gemm_out], [later])]
    plan = plan_buffers(steps, [x], [False], [result, later])
    assert plan.locations[gemm_out] != plan.locations[result]


def test_donated_argument_takes_the_output():
    x, y, out = var(), var(), var()
    steps = [Step([x, y], [out], inplace=[(out, x)])]
    donated = plan_buffers(steps, [x, y], [True, False], [out])
    assert donated.locations[out] == Location("input", 0)
    assert donated.donated_outputs == 1
    kept = plan_buffers(steps, [x, y], [False, False], [out])
    assert kept.locations[out] == Location("output", 0)


def test_donated_argument_read_later_is_not_overwritten():
    x, a, out = var(), var(), var()
    steps = [Step([x], [a]), Step([a, x], [out])]
    plan = plan_buffers(steps, [x], [True], [out])
    assert plan.locations[a] != Location("input", 0)
    assert plan.locations[out] == Location("output", 0)


def test_host_results_live_outside_the_arena():
    x, a = var(), var()
    plan = plan_buffers([Step([x], [a], host=True)], [x], [False], [])
    assert plan.locations[a].kind == "host"


def test_a_value_reshaped_into_an_output_is_written_there():
    x, a, out, total = var(), var(), var(), var(1)
    steps = [Step([x], [a]), Step([a], [out], view_of=a), Step([a], [total])]
    plan = plan_buffers(steps, [x], [False], [out, total])
    assert plan.locations[a] == plan.locations[out] == Location("output", 0)
    assert plan.views == {out}
    assert plan.arena_bytes == 0


def test_reshapes_that_still_copy():
    """Arguments, host results and outputs keep their buffers; a second reshape into
    another output copies from the first's memory."""
    x, a, b, out_a, out_b, out_c, out_x = var(), var(), var(), var(), var(), var(), var()
    steps = [Step([x], [a]), Step([x], [b], host=True), Step([x], [out_x], view_of=x),
             Step([a], [out_a], view_of=a), Step([a], [out_c], view_of=a),
             Step([b], [out_b], view_of=b)]
    plan = plan_buffers(steps, [x], [False], [out_a, out_b, out_c, out_x])
    assert plan.views == {out_a}
    assert plan.locations[out_c] == Location("output", 2)
    assert plan.locations[out_b] == Location("output", 1)
    assert plan.locations[out_x] == Location("output", 3)
    assert plan.locations[b].kind == "host"


def test_a_reshape_of_an_output_copies_it():
    x, a, out = var(), var(), var()
    steps = [Step([x], [a]), Step([a], [out], view_of=a)]
    plan = plan_buffers(steps, [x], [False], [a, out])
    assert plan.views == set()
    assert plan.locations[a] != plan.locations[out]
