"""``ember.distributed``: one program across processes and hosts (as
``jax.distributed``), with MPI (mpi4py) carrying collectives between processes on
CPUs and NCCL on CUDA devices. Start the processes with ``ember launch -n N script.py``
(or mpirun / srun) and call ``initialize()`` first thing in the script."""
from ember.distributed.errors import DistributedError, PeerFailedError
from ember.distributed.initialize import initialize, shutdown
from ember.distributed.state import is_initialized, process_count, process_index

__all__ = ["DistributedError", "PeerFailedError", "initialize", "is_initialized",
           "process_count", "process_index", "shutdown"]
