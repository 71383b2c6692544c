"""One process of ``ember bench --distributed`` (run by ``ember launch``): times the
three all-reduces on each buffer size; process 0 writes them to the JSON file named by
the first argument."""
from __future__ import annotations

import json
import statistics
import sys
import time


def _median_seconds(run, repeats: int, comm) -> tuple[float, float]:
    """Median over trials of the slowest process's time per call, and of its CPU time
    per call (this thread's: on a loaded host the wall time is mostly waiting for a
    core, and the CPU time what the call itself costs, waiting for peers included)."""
    run()  # warm up (and compile)
    trials, cpu = [], []
    for _ in range(5):
        comm.Barrier()
        start, start_cpu = time.perf_counter(), time.thread_time()
        for _ in range(repeats):
            run()
        elapsed = (time.perf_counter() - start) / repeats
        used = (time.thread_time() - start_cpu) / repeats
        trials.append(comm.allreduce(elapsed, op=_max()))
        cpu.append(comm.allreduce(used, op=_max()))
    return statistics.median(trials), statistics.median(cpu)


def _max():
    from mpi4py import MPI

    return MPI.MAX


def main() -> None:
    import numpy as np

    import ember
    import ember.distributed
    from ember import lax
    from ember.bench.distributed import QUICK_SIZES, SIZES, ready_to_time
    from ember.distributed.host_collectives import reduce_in_order
    from ember.distributed.state import current
    from ember.sharding import P

    ember.distributed.initialize()
    ready_to_time()
    comm = current().world
    count = ember.process_count()
    quick = "--quick" in sys.argv
    mesh = ember.make_mesh((count,), ("p",))
    psum = ember.jit(ember.shard_map(lambda x: lax.psum(x, "p"), mesh=mesh,
                                     in_specs=P("p"), out_specs=P()))
    ranks = tuple(range(count))
    rows = []
    for nbytes in (QUICK_SIZES if quick else SIZES):
        n = nbytes // 4
        x = np.random.default_rng(ember.process_index()).standard_normal(n).astype(np.float32)
        out = np.empty_like(x)
        repeats = max(2, min(200, (1 << 24) // nbytes)) // (4 if quick else 1) + 1
        row = {"bytes": nbytes}
        for name, run in (("mpi", lambda: comm.Allreduce(x, out)),
                          ("psum", lambda: np.asarray(psum(x))),
                          ("host", lambda: reduce_in_order(x[None], ranks))):
            row[name], row[f"{name}_cpu"] = _median_seconds(run, repeats, comm)
        expected = np.empty_like(x)
        comm.Allreduce(x, expected)
        np.testing.assert_allclose(np.asarray(psum(x)), expected, rtol=1e-5, atol=1e-5)
        rows.append(row)
    if ember.process_index() == 0:
        with open(sys.argv[1], "w") as handle:
            json.dump(rows, handle)


if __name__ == "__main__":
    main()
