"""Eager dispatch: one primitive applied to concrete values, outside any transformation."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.backends.base import Device
from ember.config import config
from ember.core import dtypes, trace
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.source_info import user_frame
from ember.errors import EmberError, EmberValueError, NaNError, annotate
from ember.runtime.array import Array, canonical_host, from_host
from ember.runtime.devices import default_device


def common_device(values: Sequence[Any]) -> tuple[Device, bool]:
    """The device an operation on ``values`` runs on, and whether its result is committed.

    Committed arrays decide (two different committed devices are an error); otherwise
    the device every uncommitted array shares, else the default device.
    """
    committed: Device | None = None
    uncommitted: set[Device] = set()
    for value in values:
        if not isinstance(value, Array):
            continue
        if not value.committed:
            uncommitted.add(value.device)
        elif committed is None:
            committed = value.device
        elif value.device != committed:
            raise EmberValueError(
                f"arrays committed to different devices ({committed} and {value.device}) met "
                "in one operation; move one with ember.device_put(x, device) first")
    if committed is not None:
        return committed, True
    if len(uncommitted) == 1:
        return uncommitted.pop(), False
    return default_device(), False


def to_buffer(value: Any, device: Device) -> Any:
    if isinstance(value, Array):
        if value.device != device:  # an uncommitted array follows the committed ones
            return device.backend.put(value._host(), device)
        return value.live_buffer()
    return device.backend.put(canonical_host(value), device)


def apply_primitive(prim: Primitive, values: list, params: dict) -> Any:
    device, committed = common_device(values)
    avals = [aval_of(v) for v in values]
    try:
        out_avals = prim.abstract_eval(*avals, **params)
    except EmberError as error:
        raise annotate(error, user_frame(2)) from None
    buffers = [to_buffer(v, device) for v in values]
    outs = device.backend.apply_primitive(prim, buffers, params)
    if not prim.multiple_results:
        outs, out_avals = [outs], [out_avals]
    arrays = [_wrap(out, aval, device, committed) for out, aval in zip(outs, out_avals)]
    if config.debug_nans:
        check_nans(prim, arrays)
    return arrays if prim.multiple_results else arrays[0]


def _wrap(buffer: Any, aval: ShapedArray, device: Device, committed: bool) -> Array:
    if device.backend.host_memory:
        host = np.asarray(buffer)
        if host.dtype != aval.dtype:
            host = host.astype(aval.dtype)
        if host.shape != aval.shape:
            raise AssertionError(f"internal error: {host.shape} from an op typed {aval}")
        if host.flags.writeable:
            host.flags.writeable = False
        buffer = host
    return Array(buffer, aval, device, committed)


def check_nans(prim: Primitive, arrays: Sequence[Array], source=None) -> None:
    for array in arrays:
        if dtypes.is_inexact(array.dtype) and np.isnan(array._host()).any():
            where = source or user_frame(3)
            raise NaNError(f"debug_nans: primitive '{prim.name}' produced a NaN "
                           f"(output {array.aval.str_short()})" + (f"\n  (at {where})" if where else ""))


def device_put(value: Any, device: Any = None) -> Any:
    """Place a value (or a pytree of values) on ``device`` (default: the default device),
    or split it over devices with a ``Sharding`` (a pytree of them, or a PartitionSpec
    under ``ember.set_mesh``)."""
    from ember.core.pytree import tree_map
    from ember.runtime.devices import get_backend
    from ember.sharding.placement import is_sharding_spec, put_sharded

    if is_sharding_spec(device):
        return put_sharded(value, device)

    if isinstance(device, str):
        device = get_backend(device).default_device()
    target = device or default_device()
    committed = device is not None  # an explicit device commits the result (as JAX)

    def put(leaf: Any) -> Array:
        if isinstance(leaf, Array):
            if leaf.device == target and leaf.committed >= committed:
                return leaf
            return from_host(leaf._host(), target, committed)
        return from_host(canonical_host(leaf), target, committed)

    return tree_map(put, value)


def device_get(value: Any) -> Any:
    """A pytree's arrays as NumPy arrays on the host (other leaves unchanged), as
    ``jax.device_get``."""
    from ember.core.pytree import tree_map

    return tree_map(lambda leaf: leaf._host() if isinstance(leaf, Array) else leaf, value)


trace.set_eager_apply(apply_primitive)
