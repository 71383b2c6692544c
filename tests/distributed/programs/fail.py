"""A data-parallel step that process 1 breaks in the way the first argument names:
'raise', 'kill' (SIGKILL, mid-step), 'exit' (an early sys.exit(3)), 'mismatch'
(another batch shape), 'stall' (later than the timeout). A second argument is ignored:
the test finds the processes by it. The others must raise an error that
names process 1, well within the timeout, and every process must end. A third argument,
'host:port', makes the processes join explicitly through a coordinator there instead of
by detecting the launch. EMBER_TEST_MEETING='python' makes every process meet through
mpi4py, 'native' in C (where it can be built). EMBER_TEST_SLOW_REPORT=1 reports an error
through an excepthook that takes a second before it writes (as a logging or
rich-traceback hook may): a failing process must stay until the others have written."""
import os
import signal
import sys
import time

import numpy as np

import ember
import ember.distributed
import ember.numpy as jnp
from ember import lax
from ember.sharding import P


def slow_report(kind, value, traceback):
    time.sleep(1.0)
    sys.__excepthook__(kind, value, traceback)
    print("report written", flush=True)


if os.environ.get("EMBER_TEST_SLOW_REPORT") == "1":
    sys.excepthook = slow_report  # (before initialize, which calls it after its own work)
if len(sys.argv) > 3:  # explicit: this process's place as another launcher would give it
    ember.distributed.initialize(coordinator_address=sys.argv[3],
                                 num_processes=int(os.environ["OMPI_COMM_WORLD_SIZE"]),
                                 process_id=int(os.environ["OMPI_COMM_WORLD_RANK"]))
else:
    ember.distributed.initialize()
if os.environ.get("EMBER_TEST_MEETING") == "python":
    from ember.distributed.state import current

    current().guard._native_meeting = lambda: None
elif os.environ.get("EMBER_TEST_MEETING") == "native":
    from ember.distributed.native_meeting import _build

    if _build() is not None:
        _build().wait()
mode = sys.argv[1]
mesh = ember.make_mesh((ember.device_count("cpu"),), ("data",))
me = ember.process_index()


def step(w, x):
    return lax.psum(jnp.sum(x * w), "data")


def kill_here(x):
    if me == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return x


def body(w, x):
    if mode == "kill":  # dies inside the compiled step, before its collective
        x = ember.pure_callback(kill_here, ember.ShapeDtypeStruct(x.shape, x.dtype), x,
                                vmap_method="broadcast_all")
    return step(w, x)


run = ember.jit(ember.shard_map(body, mesh=mesh, in_specs=(P(), P("data")), out_specs=P()))
rows = 4 if not (mode == "mismatch" and me == 1) else 6
x = np.ones((rows * ember.local_device_count("cpu"), 3), np.float32)
w = np.ones(3, np.float32)
print("first step", float(run(w, x)), flush=True)
started = time.monotonic()
try:
    if me == 1:
        if mode == "raise":
            raise ValueError("boom on purpose")
        if mode == "exit":
            sys.exit(3)
        if mode == "stall":
            time.sleep(float(ember.config.distributed_timeout) + 2)
    print("second step", float(run(w, x)), flush=True)
finally:
    print(f"waited {time.monotonic() - started:.1f} s", flush=True)
