"""Process 1 raises before the job's second collective; process 0, which waits there,
reports it through an excepthook that takes a second before it writes (as a logging or
rich-traceback hook may). mpirun ends a job's processes soon after one exits with a
non-zero status without finalizing MPI, so process 1 must stay until process 0 has
written its report. The first argument is ignored: the test finds the processes by it."""
import sys
import time

import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember import lax
from ember.sharding import P


def slow_hook(kind, value, tb):
    time.sleep(1.0)
    sys.__excepthook__(kind, value, tb)
    print("report written", flush=True)


sys.excepthook = slow_hook  # (before initialize, which calls it after its own work)
ember.distributed.initialize()
mesh = ember.make_mesh((ember.device_count("cpu"),), ("data",))
run = ember.jit(ember.shard_map(lambda x: lax.psum(jnp.sum(x), "data"), mesh=mesh,
                                in_specs=P("data"), out_specs=P()))
x = np.ones((4 * ember.local_device_count("cpu"),), np.float32)
print("first step", float(run(x)), flush=True)
if ember.process_index() == 1:
    raise ValueError("boom on purpose")
print("second step", float(run(x)), flush=True)
