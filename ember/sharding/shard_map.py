"""``shard_map``: a function written per shard, mapped over the devices of a mesh.

Execution, in this first slice, follows JAX's original design for pmap: the body is
traced once at per-shard shapes under one batch interpreter per mesh axis
(``ember.transforms.vmap`` with the axis name), so each collective is an operation
across the shards (see ``ember.ops.collectives``) and the whole shard_map is ONE
program over all shards, compiled once by any backend whatever the device count.
With ``ember.config.update("spmd_execution", "per_device")`` the per-device program
runs instead on one thread per device, concurrently (``ember.sharding.device_threads``).

With ``check_vma=True`` (the default) a value the body returns must be the same on
every shard of each mesh axis its ``out_specs`` leaves out, and the gradient of an
input replicated over an axis (``P()``) is already summed over that axis, as in JAX
0.10: put ``pmean`` inside the loss, not on the gradients::

    def step(w, x):                    # w: P(), x: P('data')
        loss = lambda w: lax.pmean(jnp.mean((x @ w) ** 2), 'data')
        return w - 0.1 * ember.grad(loss)(w)   # the gradient of the global mean

    shard_map(step, mesh=mesh, in_specs=(P(), P('data')), out_specs=P())

A further ``pmean`` of that gradient would be a no-op in value, but a ``psum`` would
multiply it by the number of shards (the mistake JAX users make).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ember.core.pytree import tree_flatten, tree_unflatten
from ember.errors import EmberValueError, user_errors
from ember.sharding import device_threads
from ember.sharding.mesh import Mesh, get_mesh
from ember.sharding.partition_spec import PartitionSpec
from ember.sharding.shardings import NamedSharding

__all__ = ["shard_map"]

# Hook of ember.distributed: for a mesh whose devices belong to several processes, the
# view that runs this process's block of it (None for a mesh inside one process).
process_view: Callable[[Mesh], Any] = lambda mesh: None


def shard_map(f: Callable | None = None, /, *, out_specs: Any, in_specs: Any = None,
              mesh: Mesh | None = None, axis_names: Any = None,
              check_vma: bool = True) -> Callable:
    """Map ``f`` over the shards of ``mesh`` (as ``jax.shard_map``).

    ``in_specs`` / ``out_specs`` hold one PartitionSpec per argument / output (a
    pytree prefix): the mesh axes each dimension is split over. Inside ``f`` arrays
    have their per-shard shapes, and ``ember.lax`` collectives act over mesh axes.
    ``mesh`` defaults to the current one (``ember.set_mesh``); without ``in_specs``
    each argument is split as its own sharding says.
    """
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs,
                                 mesh=mesh, axis_names=axis_names, check_vma=check_vma)
    name = getattr(f, "__name__", "function")
    grid_of: list[Mesh | None] = [None]
    programs: dict = {}  # the per-device programs compiled (spmd_execution="per_device")

    @user_errors
    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        grid = mesh if mesh is not None else get_mesh()
        if grid is None:
            raise EmberValueError(f"shard_map of {name}: no mesh; pass mesh= or use "
                                  "`with ember.set_mesh(mesh):`")
        if axis_names is not None and set(axis_names) != set(grid.axis_names):
            raise EmberValueError("shard_map over a subset of the mesh axes (axis_names=) "
                                  "is not supported yet; map over every axis")
        leaves, in_tree = tree_flatten(args)
        specs = (_specs_per_leaf(in_specs, args, "in_specs", name) if in_specs is not None
                 else [_spec_of(leaf, grid) for leaf in leaves])
        view = process_view(grid)
        if view is not None:  # the mesh spans processes: run this process's block
            leaves = [view.local_argument(leaf) for leaf in leaves]
            with view.active(name, leaves):
                return run(view.local_mesh, leaves, in_tree, specs, view.place)
        if device_threads.applies(grid):
            outs, out_tree, out_specs_flat = device_threads.run_per_device(
                f, grid, leaves, in_tree, specs, out_specs, check_vma, name, programs)
            return tree_unflatten(out_tree, [_placed(o, grid, spec)
                                             for o, spec in zip(outs, out_specs_flat)])
        return run(grid, leaves, in_tree, specs,
                   lambda value, spec: _placed(value, grid, spec))

    def run(grid, leaves, in_tree, specs, place):
        blocked = [_to_blocks(leaf, spec, grid, i, name)
                   for i, (leaf, spec) in enumerate(zip(leaves, specs))]
        store: dict[str, Any] = {}

        def body(*shards: Any) -> list[Any]:
            outs, store["tree"] = tree_flatten(f(*tree_unflatten(in_tree, shards)))
            return outs

        axes = list(grid.shape.items())
        grid_of[0] = grid
        outs = _map_axes(body, axes, blocked, store, check_vma, name)
        out_tree = store["tree"]
        out_specs_flat = store["out_specs"]
        return tree_unflatten(out_tree, [place(_from_blocks(o, spec, grid, name), spec)
                                         for o, spec in zip(outs, out_specs_flat)])

    def _map_axes(body, axes, blocked, store, check, name):
        """Nest one named batch interpreter per mesh axis, outermost first."""
        from ember.transforms.vmap import vmap_flat

        def level(k: int, values: list[Any]) -> list[Any]:
            if k == len(axes):
                return body(*values)
            axis, size = axes[k]
            present = [v for v, b in zip(values, blocked) if axis in b[1]]

            def inner(*mapped_values: Any) -> list[Any]:
                it = iter(mapped_values)
                return level(k + 1, [next(it) if axis in b[1] else v
                                     for v, b in zip(values, blocked)])

            outs, dims = vmap_flat(inner, size, present, [0] * len(present),
                                   axis_name=axis, check_vma=check)
            if "out_specs" not in store:
                store["out_specs"] = _specs_per_leaf(
                    out_specs, tree_unflatten(store["tree"], outs), "out_specs", name)
                for spec in store["out_specs"]:
                    NamedSharding(grid_of[0], spec)  # names only mesh axes
            return [_place_output(o, d, axis, size, spec, check, name)
                    for o, d, spec in zip(outs, dims, store["out_specs"])]

        return level(0, [b[0] for b in blocked])

    return mapped


def _spec_of(leaf: Any, mesh: Mesh) -> PartitionSpec:
    """The spec an argument is split by on ``mesh`` (``in_specs=None``: as JAX, from the
    arguments' own shardings; P() for an array not split over this mesh)."""
    sharding = getattr(leaf, "_sharding", None)
    if isinstance(sharding, NamedSharding) and sharding.mesh == mesh:
        return sharding.spec
    return PartitionSpec()


def _specs_per_leaf(specs: Any, tree: Any, what: str, name: str) -> list[PartitionSpec]:
    from ember.core.pytree import broadcast_prefix

    is_spec = lambda x: isinstance(x, PartitionSpec) or x is None  # noqa: E731
    try:
        spec_per_leaf = broadcast_prefix(specs, tree, is_leaf=is_spec)
    except ValueError:
        raise EmberValueError(f"shard_map of {name}: {what} {specs!r} must be a pytree "
                              f"prefix of the values it describes, structured as "
                              f"{tree_flatten(tree)[1]}") from None
    return [PartitionSpec() if spec is None else spec for spec in spec_per_leaf]


def _to_blocks(leaf: Any, spec: PartitionSpec, mesh: Mesh, index: int,
               name: str) -> tuple[Any, set[str]]:
    """``leaf`` reshaped so that each mesh axis splitting it is a leading dimension (in
    mesh order), and the set of those axes."""
    import ember.numpy as enp

    shape = tuple(np.shape(leaf))
    try:
        NamedSharding(mesh, spec).shard_shape(shape)
    except EmberValueError as error:
        raise EmberValueError(f"shard_map of {name}, argument {index} (flattened): "
                              f"{error}") from None
    split_shape, labels = [], []
    for dim, size in enumerate(shape):
        axes = spec.axes_of(dim)
        split_shape += [mesh.shape[a] for a in axes] + [size // math.prod(
            mesh.shape[a] for a in axes)]
        labels += list(axes) + [dim]
    blocks = enp.reshape(leaf, split_shape)
    order = [labels.index(a) for a in mesh.axis_names if a in labels]
    order += [i for i, label in enumerate(labels) if not isinstance(label, str)]
    return enp.transpose(blocks, order), set(spec.mesh_axes())


def _place_output(value: Any, dim: int | None, axis: str, size: int, spec: PartitionSpec,
                  check: bool, name: str) -> Any:
    """Leave the shards of ``axis`` stacked in front where ``spec`` splits along it;
    elsewhere the output must be the same on every shard, and one copy is kept."""
    from ember.ops.rules import move_batch_axis

    if axis in spec.mesh_axes():
        return move_batch_axis(value, dim, 0, size)
    if dim is None:
        return value
    if check:
        raise EmberValueError(
            f"shard_map of {name}: out_specs {spec} say an output is the same on every "
            f"shard of mesh axis {axis!r}, but it differs along it. Reduce it over the "
            f"axis first (lax.psum / lax.pmean / lax.all_gather), name {axis!r} in "
            "out_specs, or pass check_vma=False to keep shard 0's value")
    import ember.numpy as enp

    return enp.take(value, 0, axis=dim)


def _placed(value: Any, mesh: Mesh, spec: PartitionSpec) -> Any:
    """A concrete output carries its sharding (``NamedSharding(mesh, out_spec)``)."""
    from ember.runtime.array import Array
    from ember.sharding.placement import put_sharded

    return put_sharded(value, NamedSharding(mesh, spec)) if isinstance(value, Array) else value


def _from_blocks(value: Any, spec: PartitionSpec, mesh: Mesh, name: str) -> Any:
    """The global array from per-shard blocks stacked in front (in mesh order)."""
    import ember.numpy as enp

    stacked = [a for a in mesh.axis_names if a in spec.mesh_axes()]
    ndim = np.ndim(value) - len(stacked)
    if len(spec) > ndim:
        raise EmberValueError(f"shard_map of {name}: out_specs {spec} has {len(spec)} "
                              f"entries for an output of {ndim} dimensions (per-shard "
                              f"shape {tuple(np.shape(value))[len(stacked):]})")
    order, out_shape = [], []
    for dim in range(ndim):
        axes = spec.axes_of(dim)
        order += [stacked.index(a) for a in axes] + [len(stacked) + dim]
        out_shape.append(math.prod(mesh.shape[a] for a in axes)
                         * np.shape(value)[len(stacked) + dim])
    return enp.reshape(enp.transpose(value, order), out_shape)
