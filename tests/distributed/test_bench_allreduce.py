"""``ember bench --distributed``'s all-reduce suite, quick, on 2 processes: it runs through
the launcher, its worker checks Ember's psum against mpi4py's Allreduce, and every
size gets a time for each of the three all-reduces."""
from __future__ import annotations

import json

from ember.bench.distributed import QUICK_SIZES
from tests.distributed.conftest import needs_mpi, run_ember


def test_quick_allreduce_suite_times_each_all_reduce_on_each_size(tmp_path):
    needs_mpi()
    out = tmp_path / "bench.json"
    done = run_ember("bench", "--distributed", "--suite", "allreduce", "--quick",
                     "--processes", "2", "--json", str(out))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    rows = json.loads(out.read_text())["allreduce"]["2"]
    assert [row["bytes"] for row in rows] == QUICK_SIZES
    for row in rows:
        assert all(row[name] > 0 for name in ("mpi", "psum", "host")), row
    assert "ember psum" in done.stdout
