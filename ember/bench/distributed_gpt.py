"""One process of the GPT data-parallel step of ``ember bench --distributed`` (run by
``ember launch``; 2 processes x 1 device and 1 process x 2 devices run this same file).

The step is ``ember bench --sharded``'s ``gpt_block_dp`` (a transformer block, ``pmean``
in the loss, SGD) over a ``'data'`` mesh of every device of the job, each process
holding its block of the batch. It trains ``LOSS_STEPS`` steps for the loss curve, then
times single steps on fixed inputs: each sample is the slowest process's time, after a
barrier. Process 0 writes the JSON file named by the first argument."""
from __future__ import annotations

import argparse
import json
import time

LOSS_STEPS = 3


def main() -> None:
    import numpy as np

    import ember
    import ember.distributed
    import ember.nn  # noqa: F401  (subpackages the program uses)
    import ember.numpy  # noqa: F401
    from ember.bench.distributed import ready_to_time
    from ember.bench.sharded import PROGRAMS, batch_sizes, data_parallel_step
    from ember.distributed.state import current
    from ember.sharding import NamedSharding, P

    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="cpu")
    parser.add_argument("--samples", type=int, default=5)
    options = parser.parse_args()
    ember.distributed.initialize()
    ready_to_time()
    comm = current().world
    workload, loss_of = PROGRAMS["gpt_block_dp"]
    params, *batch = workload.make_inputs(**batch_sizes(workload, options.sizes))
    mesh = ember.make_mesh((ember.device_count("cpu"),), ("data",))
    step = ember.jit(data_parallel_step(ember, loss_of, mesh, labelled=len(batch) == 2))

    def placed(value, spec):
        return ember.make_array_from_callback(value.shape, NamedSharding(mesh, spec),
                                              lambda index: value[index])

    args = ({k: placed(v, P()) for k, v in params.items()},
            *(placed(b, P("data")) for b in batch))
    start = time.perf_counter()
    trained, loss = ember.block_until_ready(step(*args))
    first_call_s = comm.allreduce(time.perf_counter() - start, op=_max())
    losses = [float(np.asarray(loss))]
    for _ in range(LOSS_STEPS - 1):
        trained, loss = step(trained, *args[1:])
        losses.append(float(np.asarray(loss)))
    samples = []
    for _ in range(options.samples):
        comm.Barrier()
        start = time.perf_counter()
        ember.block_until_ready(step(*args))
        samples.append(comm.allreduce(time.perf_counter() - start, op=_max()))
    if ember.process_index() == 0:
        with open(options.out, "w") as handle:
            json.dump({"processes": ember.process_count(),
                       "devices_per_process": ember.local_device_count("cpu"),
                       "first_call_s": first_call_s, "losses": losses,
                       "samples_s": samples}, handle)
    ember.distributed.shutdown()


def _max():
    from mpi4py import MPI

    return MPI.MAX


if __name__ == "__main__":
    main()
