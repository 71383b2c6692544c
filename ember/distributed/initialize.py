"""``ember.distributed.initialize``: join this process to a job of several.

Under ``mpirun`` / ``mpiexec`` / ``srun`` (and ``ember launch``) the launcher's variables
say everything, and the job is MPI's world. Other launchers pass the coordinator's
address and this process's place explicitly; the coordinator (process 0) checks that
the processes form one job, and MPI still carries every collective.
"""
from __future__ import annotations

import socket
from collections.abc import Sequence

from ember.config import config
from ember.distributed import state
from ember.distributed.environment import Launch, detect_launch
from ember.distributed.errors import DistributedError

__all__ = ["initialize", "shutdown"]


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None,
               local_device_ids: Sequence[int] | int | None = None) -> None:
    """Join this process to the job, as ``jax.distributed.initialize``. With no
    arguments the launch is detected (Open MPI, MPICH, Slurm); else pass all of
    ``coordinator_address`` ('host:port' of process 0), ``num_processes`` and
    ``process_id``. ``local_device_ids`` picks this process's host devices (default:
    all ``config.num_cpu_devices`` of them); every process must have as many."""
    if state.is_initialized():
        raise DistributedError("ember.distributed.initialize() was already called in this "
                               "process; call it once, before using any device")
    launch = detect_launch()
    explicit = (coordinator_address, num_processes, process_id)
    if any(v is not None for v in explicit) and not all(v is not None for v in explicit):
        missing = [n for n, v in zip(("coordinator_address", "num_processes", "process_id"),
                                     explicit) if v is None]
        if launch is None:
            raise DistributedError(f"initialize: pass {', '.join(missing)} too (or start "
                                   "the processes with `ember launch` / mpirun / srun, and "
                                   "pass nothing)")
    _check_numbers(num_processes, process_id, launch)
    devices = _local_device_count(local_device_ids)
    world = _mpi_world()
    size, rank = world.Get_size(), world.Get_rank()
    if coordinator_address is not None:
        world = _rendezvous(world, coordinator_address, num_processes or size,
                            process_id if process_id is not None else rank, devices)
    elif launch is not None and launch.num_processes != size:
        raise DistributedError(
            f"{launch.launcher} started {launch.num_processes} processes, but MPI sees a "
            f"job of {size}: this mpi4py's MPI is not the launcher's. Use the mpirun of "
            "the same MPI (`ember launch`), or srun --mpi=pmix under Slurm")
    counts = world.allgather(devices)
    if len(set(counts)) != 1:
        raise DistributedError(f"processes have different numbers of devices {counts} "
                               "(by rank); give each the same (EMBER_NUM_CPU_DEVICES or "
                               "local_device_ids)")
    _start(world, devices, launch.launcher if launch else "explicit")


def _check_numbers(num_processes, process_id, launch: Launch | None) -> None:
    if num_processes is not None and (not isinstance(num_processes, int) or num_processes < 1):
        raise DistributedError(f"initialize: num_processes must be a positive int, got "
                               f"{num_processes!r}")
    if process_id is not None:
        limit = num_processes if num_processes is not None else None
        if not isinstance(process_id, int) or process_id < 0 or (
                limit is not None and process_id >= limit):
            raise DistributedError(f"initialize: process_id must be an int in 0.."
                                   f"{(limit or 1) - 1}, got {process_id!r}")
    if launch is not None:
        for name, given, found in (("num_processes", num_processes, launch.num_processes),
                                   ("process_id", process_id, launch.process_id)):
            if given is not None and given != found:
                raise DistributedError(f"initialize: {name}={given}, but {launch.launcher} "
                                       f"says {found}; pass nothing to use the launcher's")


def _local_device_count(local_device_ids) -> int:
    if local_device_ids is None:
        return int(config.num_cpu_devices)
    ids = [local_device_ids] if isinstance(local_device_ids, int) else list(local_device_ids)
    if not ids or len(set(ids)) != len(ids) or any(
            not isinstance(i, int) or not 0 <= i < config.num_cpu_devices for i in ids):
        raise DistributedError(
            f"initialize: local_device_ids={local_device_ids!r} must be distinct device "
            f"numbers of this process, 0..{config.num_cpu_devices - 1} (ember.config "
            "num_cpu_devices)")
    config.update("num_cpu_devices", len(ids))
    return len(ids)


def _mpi_world():
    try:
        from mpi4py import MPI
    except ImportError:
        raise DistributedError("ember.distributed needs mpi4py and an MPI: pip install "
                               "'ember[distributed]'") from None
    world = MPI.COMM_WORLD.Dup()
    world.Set_errhandler(MPI.ERRORS_RETURN)
    return world


def _rendezvous(world, address: str, num_processes: int, process_id: int, devices: int):
    from ember.distributed import rendezvous

    secret = rendezvous.secret_from_environment()
    hello = {"process_id": process_id, "num_processes": num_processes, "devices": devices,
             "mpi_rank": world.Get_rank(), "host": socket.gethostname()}
    timeout = float(config.distributed_timeout)
    if process_id == 0:
        everyone = rendezvous.serve(address, secret, hello, num_processes, timeout)
    else:
        everyone = rendezvous.join(address, secret, hello, timeout)
    if world.Get_size() != num_processes:
        raise DistributedError(
            f"the {num_processes} processes met at the coordinator, but they are not in "
            f"one MPI job (this one's MPI world has {world.Get_size()}): start them with "
            "`ember launch`, mpirun or srun --mpi=pmix so that MPI can connect them")
    ranks = sorted(p["mpi_rank"] for p in everyone)
    if ranks != list(range(num_processes)):
        raise DistributedError(f"the processes at the coordinator have MPI ranks {ranks}; "
                               "they must be the processes of one MPI job")
    return world.Split(0, process_id)  # ranks ordered by process id


def _start(world, devices: int, launcher: str) -> None:
    from ember.distributed import spmd
    from ember.distributed.guard import Guard, install_exit_hooks
    from ember.runtime.devices import set_process_layout

    guard = Guard(world)
    job = state.Job(process_id=world.Get_rank(), num_processes=world.Get_size(),
                    local_device_count=devices, launcher=launcher, world=world, guard=guard)
    state._JOB[0] = job
    set_process_layout(job.process_id, job.num_processes)
    install_exit_hooks(guard)
    spmd.install()


def shutdown() -> None:
    """Leave the job: every process waits for the others here, then works alone."""
    from ember.distributed import spmd
    from ember.distributed.host_collectives import barrier
    from ember.runtime.devices import set_process_layout

    if not state.is_initialized():
        return
    barrier("shutdown")
    state._JOB[0] = None
    set_process_layout(0, 1)
    spmd.uninstall()
