"""``ember.pmap``, built on ``shard_map`` as JAX builds it now: the mapped axis becomes
a one-axis mesh over the first devices, each device's slice is one shard."""
from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember.core.pytree import tree_flatten, tree_map, tree_unflatten
from ember.errors import EmberValueError, user_errors
from ember.sharding.mesh import AxisType, Mesh
from ember.sharding.partition_spec import P
from ember.sharding.shard_map import shard_map

__all__ = ["pmap"]

_fresh = itertools.count()


def pmap(fun: Callable, axis_name: Any = None, *, in_axes: Any = 0, out_axes: int | None = 0,
         devices: Sequence[Any] | None = None, backend: str | None = None) -> Callable:
    """Map ``fun`` over axis ``in_axes`` of its arguments, one slice per device (as
    ``jax.pmap``); collectives over ``axis_name`` act across the devices. Runs as one
    program over all slices, like shard_map (see ``ember.sharding.shard_map``)."""
    from ember.transforms.vmap import _in_axes_per_arg, _leaf_axes, _normalize_axis

    name = axis_name if axis_name is not None else f"_pmap{next(_fresh)}"
    fname = getattr(fun, "__name__", "function")
    if out_axes is not None and not isinstance(out_axes, int):
        raise EmberValueError("pmap out_axes must be an int or None (one for every "
                              "output); per-output out_axes are not supported yet")

    @user_errors
    @functools.wraps(fun)
    def mapped(*args: Any) -> Any:
        from ember.runtime.devices import default_backend, devices as backend_devices

        leaves, in_tree = tree_flatten(args)
        axes = _leaf_axes(_in_axes_per_arg(in_axes, len(args), fname), args)
        axes = [_normalize_axis(a, leaf, i) for i, (a, leaf) in enumerate(zip(axes, leaves))]
        sizes = {np.shape(leaf)[a] for leaf, a in zip(leaves, axes) if a is not None}
        if len(sizes) != 1:
            raise EmberValueError(f"pmap of {fname}: the mapped axes must have one size "
                                  f"(and at least one argument must be mapped), got {sizes}")
        size = sizes.pop()
        found = list(devices) if devices is not None else backend_devices(
            backend or default_backend().name)
        if size > len(found):
            raise EmberValueError(
                f"pmap of {fname} maps over {size} devices, but only {len(found)} are "
                "available; split the host CPU with ember.config.update("
                "'num_cpu_devices', N), or map over fewer")
        mesh = Mesh(np.array(found[:size], dtype=object), (name,), AxisType.Manual)
        import ember.numpy as enp

        moved = [leaf if a is None else enp.moveaxis(leaf, a, 0)
                 for leaf, a in zip(leaves, axes)]
        specs = tuple(P() if a is None else P(name) for a in axes)

        def body(*shards: Any) -> Any:
            squeezed = [s if a is None else enp.squeeze(s, 0) for s, a in zip(shards, axes)]
            out = fun(*tree_unflatten(in_tree, squeezed))
            return out if out_axes is None else tree_map(lambda o: enp.expand_dims(o, 0), out)

        out_spec = P() if out_axes is None else P(name)
        out = shard_map(body, mesh=mesh, in_specs=specs, out_specs=out_spec,
                        check_vma=False)(*moved)
        if out_axes is None or out_axes == 0:
            return out
        return tree_map(lambda o: enp.moveaxis(o, 0, out_axes), out)

    return mapped
