"""``shard_map`` with ``spmd_execution="per_device"``: one thread per device.

The per-device program (``device_program``) is compiled once; a call splits each
argument into the devices' blocks, runs the program on one thread per device of the
mesh, concurrently (compiled code runs without the GIL), and assembles the results. The
threads' collectives go through shared memory (``device_communicator``). Under ``jit``
the whole run is one host step of the enclosing program (a ``pure_callback``).

The default, ``"fused"``, runs all shards as one batched program instead; it is used
also wherever per_device does not apply: a mesh of devices other than the host CPU's,
and a shard_map under a transformation (grad, vmap) of its own caller, whose rules
see the batched form.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.config import config
from ember.core.abstract import ShapedArray
from ember.core.pytree import PyTreeDef
from ember.sharding.device_communicator import DeviceAborted, DeviceCommunicator
from ember.sharding.device_team import run_on_threads
from ember.sharding.device_program import DeviceProgram, compile_device_program
from ember.sharding.mesh import Mesh
from ember.sharding.partition_spec import PartitionSpec
from ember.sharding.shardings import NamedSharding

__all__ = ["applies", "run_per_device"]

_HOST_PLATFORMS = ("cpu", "reference")


def applies(mesh: Mesh) -> bool:
    """Whether a shard_map over ``mesh`` called here runs per device."""
    if config.spmd_execution != "per_device" or mesh.size == 1:
        return False
    if any(d.platform not in _HOST_PLATFORMS for d in mesh.devices.flat):
        return False
    from ember.core.staging import GraphTrace
    from ember.core.trace import EvalTrace, _trace_stack

    return all(main.trace_type in (EvalTrace, GraphTrace) for main in _trace_stack)


def run_per_device(f: Callable, mesh: Mesh, leaves: list[Any], in_tree: PyTreeDef,
                   specs: Sequence[PartitionSpec], out_specs: Any, check_vma: bool,
                   name: str, programs: dict) -> tuple[list[Any], PyTreeDef, list]:
    """The flat results of shard_map of ``f`` on ``leaves``, their tree and specs;
    ``programs`` caches the compiled per-device programs of this shard_map."""
    from ember.core.abstract import aval_of
    from ember.ops.callbacks import pure_callback_p

    avals = [aval_of(leaf) for leaf in leaves]
    block_avals = [a.update(shape=NamedSharding(mesh, s).shard_shape(a.shape))
                   for a, s in zip(avals, specs)]
    key = (mesh, in_tree, tuple(specs), tuple(block_avals), config.num_threads,
           config.snapshot())
    program = programs.get(key)
    if program is None:
        program = programs[key] = compile_device_program(
            f, mesh, in_tree, specs, out_specs, check_vma, name, block_avals)
    run = DeviceRun(program, mesh, tuple(specs), [a.shape for a in avals], name)
    outs = pure_callback_p.bind(*leaves, callback=run, result_avals=run.result_avals(),
                                vmap_method="sequential")
    return list(outs), program.out_tree, program.out_specs


class DeviceRun:
    """The callback that runs one per_device shard_map on global host arrays."""

    def __init__(self, program: DeviceProgram, mesh: Mesh,
                 specs: tuple[PartitionSpec, ...], shapes: list[tuple[int, ...]],
                 name: str) -> None:
        self.program = program
        self.mesh = mesh
        self.name = name
        self.positions = list(np.ndindex(mesh.devices.shape))
        self.avals = tuple(a.update(shape=_global_shape(a.shape, spec, mesh))
                           for a, spec in zip(program.out_avals, program.out_specs))
        # each device's index into every argument; into every result, of the devices
        # that write it (along a mesh axis its spec leaves out every device holds the
        # same value, and the first one's is kept, as the fused mode keeps shard 0's)
        self.in_blocks = [_blocks(spec, shape, mesh, self.positions)
                          for spec, shape in zip(specs, shapes)]
        self.out_blocks = []
        for spec, aval in zip(program.out_specs, self.avals):
            split = {mesh.axis_names.index(a) for a in spec.mesh_axes()}
            blocks = _blocks(spec, aval.shape, mesh, self.positions)
            self.out_blocks.append([(d, index) for d, index in enumerate(blocks)
                                    if all(k in split or c == 0
                                           for k, c in enumerate(self.positions[d]))])

    def result_avals(self) -> tuple[ShapedArray, ...]:
        return self.avals

    def __repr__(self) -> str:
        return f"shard_map of {self.name} on {self.mesh.size} device threads"

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in arrays]
        results = self._run([[np.array(p, np.int32),
                              *[a[blocks[d]] for a, blocks in zip(arrays, self.in_blocks)]]
                             for d, p in enumerate(self.positions)])
        outs = []
        for i, (aval, writers) in enumerate(zip(self.avals, self.out_blocks)):
            out = np.empty(aval.shape, aval.dtype)
            for d, index in writers:
                out[index] = results[d][i]
            outs.append(out)
        return outs

    def _run(self, arguments: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """The program on every device's ``arguments``, one thread each (this one runs
        device 0); a failure is raised here, naming the device, once every thread has
        stopped."""
        communicator = DeviceCommunicator(self.positions, self.mesh.axis_names,
                                          config.distributed_timeout)
        results: list[Any] = [None] * len(arguments)
        errors: list[BaseException | None] = [None] * len(arguments)
        compiled = self.program.compiled

        def device(d: int) -> None:
            try:
                with communicator.member(d):
                    results[d] = [np.asarray(out) for out in compiled(*arguments[d])]
            except BaseException as error:  # (handed to the caller below)
                errors[d] = error
                communicator.abort()

        run_on_threads(len(arguments), device)
        failed = [d for d, e in enumerate(errors) if e is not None]
        if failed:  # the device that failed first, not the ones it woke up
            d = next((d for d in failed if not isinstance(errors[d], DeviceAborted)),
                     failed[0])
            error = errors[d]
            error.add_note(f"raised on device {self.mesh.devices[self.positions[d]]} "
                           f"(mesh position {dict(zip(self.mesh.axis_names, self.positions[d]))}"
                           f") of the per_device shard_map of {self.name}")
            raise error
        return results


def _global_shape(shape: tuple[int, ...], spec: PartitionSpec, mesh: Mesh) -> tuple[int, ...]:
    return tuple(n * int(np.prod([mesh.shape[a] for a in spec.axes_of(dim)], dtype=int))
                 for dim, n in enumerate(shape))


def _blocks(spec: PartitionSpec, shape: tuple[int, ...], mesh: Mesh,
            positions: list[tuple[int, ...]]) -> list[tuple]:
    """Each device's index into an array of ``shape`` split as ``spec``."""
    where = NamedSharding(mesh, spec).devices_indices_map(shape)
    return [where[mesh.devices[p]] for p in positions]
