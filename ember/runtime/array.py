"""``ember.Array``: a concrete array living on one device."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends.base import Device
from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.array_ops import ArrayOps
from ember.errors import EmberValueError


class Array(ArrayOps):
    """An immutable n-dimensional array on a device (host memory for cpu / reference)."""

    __slots__ = ("_buffer", "aval", "_device", "committed", "_sharding", "__weakref__")
    __array_priority__ = 100

    def __init__(self, buffer: Any, aval: ShapedArray, device: Device,
                 committed: bool = False) -> None:
        self._buffer = buffer
        self.aval = aval
        self._device = device
        # Committed arrays were placed on purpose (device_put with a device, a jit with a
        # backend, or computed from committed arrays): mixing two committed devices is an
        # error. Uncommitted ones (asarray, constants) follow the committed operands, as
        # in JAX.
        self.committed = committed
        # Set by ember.device_put(x, sharding); None: the whole array on ``device``.
        self._sharding = None

    # --- device -----------------------------------------------------------------
    @property
    def device(self) -> Device:
        return self._device

    def devices(self) -> set[Device]:
        return self.sharding.device_set

    # --- sharding (see ember.sharding) -------------------------------------------
    @property
    def sharding(self) -> Any:
        from ember.sharding.shardings import SingleDeviceSharding

        return self._sharding or SingleDeviceSharding(self._device)

    @property
    def addressable_shards(self) -> list:
        from ember.sharding.placement import shards_of

        return shards_of(self)

    @property
    def is_fully_replicated(self) -> bool:
        return self.sharding.is_fully_replicated

    def to_device(self, device: Device | str, /, *, stream: Any = None) -> "Array":
        """A copy on ``device`` (Array API); ``stream`` is accepted and ignored."""
        from ember.runtime.dispatch import device_put

        return device_put(self, device)

    def block_until_ready(self) -> "Array":
        self._device.backend.synchronize(self._buffer)
        return self

    # --- donation ---------------------------------------------------------------
    def mark_donated(self) -> None:
        self._buffer = None

    def is_deleted(self) -> bool:
        return self._buffer is None

    def live_buffer(self) -> Any:
        if self._buffer is None:
            raise EmberValueError(
                "this array was donated to a jitted function (donate_argnums) and its memory "
                "may have been reused for the results; use the function's outputs instead")
        return self._buffer

    # --- host interop -----------------------------------------------------------
    def _host(self) -> np.ndarray:
        return self._device.backend.to_host(self.live_buffer())

    def _concrete(self) -> np.ndarray:
        return self._host()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        host = self._host()
        if dtype is not None and np.dtype(dtype) != host.dtype:
            return host.astype(dtype)
        if copy:
            return host.copy()
        return host

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        export = getattr(self._device.backend, "dlpack_capsule", None)
        if export is not None and dl_device is None:  # device memory, without a copy
            return export(self._buffer, stream)
        host = self._host()
        if host.dtype.name == "bfloat16":  # NumPy exports no bfloat16: Ember's own capsule
            from ember.backends.dlpack_capsule import KDL_CPU, export_capsule

            own = np.array(host, order="C")  # (a copy: consumers may write to it)
            return export_capsule(own.ctypes.data, own.shape, own.dtype, KDL_CPU, 0, own)
        if max_version is None or max_version[0] < 1:
            # Consumers of DLPack before 1.0 cannot be told that the memory is read-only
            # (Ember's buffers are): they get a copy, unless they forbid one.
            if copy is False:
                raise BufferError("this consumer of DLPack (before 1.0) cannot share Ember's "
                                  "read-only memory without a copy; pass copy=None or True")
            return host.copy().__dlpack__(stream=stream)
        return host.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                               copy=copy)

    def __dlpack_device__(self):
        device = getattr(self._device.backend, "dlpack_device", None)
        if device is not None:
            return device(self._buffer)
        return self._host().__dlpack_device__()

    def __repr__(self) -> str:
        body = np.array2string(self._host(), separator=", ", prefix="Array(")
        return f"Array({body}, dtype={self.dtype.name})"

    def __str__(self) -> str:
        return str(self._host())

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self._host().item(), spec)
        return format(str(self), spec)

    def __reduce__(self):  # pickling for user convenience (multiprocessing); never read by Ember
        return (_rebuild, (self._host(),))

    def copy(self) -> "Array":
        return self


def _rebuild(host: np.ndarray) -> "Array":
    from ember.runtime.dispatch import device_put

    return device_put(host)


def from_host(host: np.ndarray, device: Device, committed: bool = False) -> Array:
    """Wrap or transfer a NumPy array (already of a canonical dtype) to ``device``."""
    aval = ShapedArray(host.shape, host.dtype)
    return Array(device.backend.put(host, device), aval, device, committed)


def canonical_host(value: Any, dtype: Any = None) -> np.ndarray:
    """A read-only, C-contiguous NumPy array of a canonical Ember dtype."""
    if dtype is None:
        if dtypes.is_weak_scalar(value):
            dtype = dtypes.python_scalar_dtype(value)
        else:
            dtype = dtypes.canonicalize(np.asarray(value).dtype)
    host = np.asarray(value, dtype=dtype)
    if isinstance(value, np.ndarray) and value.flags.writeable and np.may_share_memory(host, value):
        host = host.copy()  # never alias memory the caller may still mutate
    if not host.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
        host = np.ascontiguousarray(host)
    host.flags.writeable = False
    return host
