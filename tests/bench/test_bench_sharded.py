"""``ember bench --sharded``: every cell is a fresh process on its own device count, the
sharded losses are checked against the unsharded one, and the ratios are computed from
the cells. Quick sizes, few cells; nothing here asserts speed."""
from __future__ import annotations

import importlib.util

import pytest

from ember.bench import sharded
from ember.bench.command import main

FRAMEWORKS = ("ember", "jax") if importlib.util.find_spec("jax") else ("ember",)


@pytest.mark.parametrize("frameworks", sorted({FRAMEWORKS, ("ember",)}))
def test_a_quick_run_measures_each_cell_and_checks_its_loss(frameworks):
    """(Also without JAX's column, as in CI: its empty cells are not flagged.)"""
    summary = sharded.run("quick", 1, frameworks=frameworks, device_counts=(8,),
                          programs=("mlp_dp",), settle_s=0.0)
    found = summary["programs"]["mlp_dp"]
    cells = found["cells"]
    assert set(cells) == {"ember_unsharded", *(f"{f}_{n}" for f in frameworks for n in (8,))}
    assert all(cell["status"] == "ok" for cell in cells.values()), cells
    for row in found["rows"]:
        for framework in frameworks:
            assert row[f"{framework}_loss_ok"], row
        base = cells["ember_unsharded"]
        assert row["ember_over_unsharded_step"] == pytest.approx(
            row["ember_step_s"] / base["step_s"])
        assert row["ember_over_unsharded_compile"] == pytest.approx(
            row["ember_compile_s"] / base["compile_s"])
        if "jax" in frameworks:
            assert row["jax_over_ember_step"] == pytest.approx(
                row["jax_step_s"] / row["ember_step_s"])
    for cell in cells.values():  # one sample per repeat, round-robin
        assert len(cell["samples_s"]) == 1
    table = sharded.format_table(summary)
    assert table.splitlines()[0].startswith("mlp_dp (unsharded Ember: ")
    assert len([line for line in table.splitlines() if line.split()[0] == "8"]) == 1
    assert "!" not in table.split("jax/ember above 1")[0]


def test_a_loss_that_differs_is_flagged():
    base = {"status": "ok", "step_s": 1.0, "compile_s": 2.0, "loss": 3.0}
    off = dict(base, loss=3.0 * (1 + 1e-4))
    rows = sharded._rows({"ember_unsharded": base, "ember_2": off}, ("ember",), (2,))
    assert rows[0]["ember_loss_ok"] is False
    failed = {"status": "error", "reason": "boom"}
    rows = sharded._rows({"ember_unsharded": base, "ember_2": failed}, ("ember",), (2,))
    assert rows[0]["ember_loss_ok"] is False and rows[0]["ember_step_s"] is None


def test_the_batch_splits_over_every_device_count():
    sizes = sharded.batch_sizes(sharded.TRANSFORMER, "quick")
    assert sizes["batch"] % max(sharded.DEVICE_COUNTS) == 0
    assert sharded.batch_sizes(sharded.MLP_STEP, "cpu")["batch"] == 256  # already splits


def test_the_bench_command_has_the_flag(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--sharded" in capsys.readouterr().out


def test_the_per_device_column():
    """Ember per device ("threads") beside fused: its own cells (none on 1 device),
    its loss checked, its column in the table."""
    summary = sharded.run("quick", 1, frameworks=("ember", sharded.PER_DEVICE),
                          device_counts=(1, 2), programs=("mlp_dp",), settle_s=0.0)
    found = summary["programs"]["mlp_dp"]
    assert set(found["cells"]) == {"ember_unsharded", "ember_1", "ember_2", "threads_2"}
    two = next(row for row in found["rows"] if row["devices"] == 2)
    assert two["threads_loss_ok"] and two["threads_step_s"] > 0
    assert "per-dev" in sharded.format_table(summary)
