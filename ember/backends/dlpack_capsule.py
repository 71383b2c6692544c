"""DLPack capsules over raw pointers (the classic, unversioned ABI), so CUDA buffers can
be shared with PyTorch and CuPy without a copy, and host bfloat16 arrays, which NumPy's
own DLPack cannot carry, can too.

``export_capsule`` wraps memory Ember owns (``owner`` is kept alive until the consumer
calls the deleter, or until the capsule dies unconsumed); ``import_capsule`` reads a
producer's capsule and marks it used. The layout follows ``dlpack.h``: DLManagedTensor
{DLTensor {data, device {type, id}, ndim, dtype {code, bits, lanes}, shape, strides,
byte_offset}, manager_ctx, deleter}. Nothing here depends on the device type, which is
how the tests check it on host memory with NumPy.
"""
from __future__ import annotations

import ctypes
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.errors import EmberTypeError

KDL_CPU, KDL_CUDA = 1, 2
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_BFLOAT = 4


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", _DELETER)]

# The destructor gets the capsule while it is being freed: a raw pointer, never a py_object.
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

# Exported tensors still alive: manager_ctx -> (the struct, its shape array, the owner).
_live: dict[int, tuple[Any, ...]] = {}
_keys = itertools.count(1)


def _dl_dtype(dtype: np.dtype) -> _DataType:
    if dtype.name == "bfloat16":
        return _DataType(_BFLOAT, 16, 1)
    if dtype.kind not in _CODES:
        raise EmberTypeError(f"dtype {dtype.name} has no DLPack equivalent")
    return _DataType(_CODES[dtype.kind], dtype.itemsize * 8, 1)


def _np_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise EmberTypeError(f"DLPack vector dtypes (lanes={lanes}) are not supported")
    if code == _BFLOAT and bits == 16:
        from ember.core import dtypes

        if dtypes.bfloat16 is not None:
            return np.dtype(dtypes.bfloat16)
    kinds = {v: k for k, v in _CODES.items()}
    if code not in kinds:
        raise EmberTypeError(f"DLPack dtype code {code} is not supported")
    return np.dtype(f"{kinds[code]}{bits // 8}") if code != _CODES["b"] else np.dtype(np.bool_)


@_DELETER
def _delete(managed) -> None:
    _live.pop(managed.contents.manager_ctx, None)


@_CAPSULE_DESTRUCTOR
def _destroy_unused(capsule) -> None:
    """A capsule nobody consumed still owns its tensor."""
    if _raw_is_valid(capsule, b"dltensor"):
        address = _raw_get_pointer(capsule, b"dltensor")
        _delete(ctypes.cast(address, ctypes.POINTER(_Managed)))


def export_capsule(pointer: int, shape: tuple[int, ...], dtype: np.dtype, device_type: int,
                   device_id: int, owner: Any) -> Any:
    """A "dltensor" capsule of a C-contiguous array at ``pointer``; ``owner`` lives until
    the consumer is done with it."""
    key = next(_keys)
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    managed = _Managed()
    managed.dl_tensor = _Tensor(pointer, _Device(device_type, device_id), len(shape),
                                _dl_dtype(np.dtype(dtype)), dims, None, 0)
    managed.manager_ctx = key
    managed.deleter = _delete
    _live[key] = (managed, dims, owner)
    return _api.PyCapsule_New(ctypes.addressof(managed), b"dltensor", _destroy_unused)


@dataclass
class Imported:
    """A producer's tensor: where it is and what keeps it alive (``capsule``)."""

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype
    device: tuple[int, int]
    capsule: Any

    def __del__(self) -> None:
        managed = ctypes.cast(_api.PyCapsule_GetPointer(self.capsule, b"used_dltensor"),
                              ctypes.POINTER(_Managed))
        if managed.contents.deleter:
            managed.contents.deleter(managed)


def import_capsule(capsule: Any) -> Imported:
    """Consume a "dltensor" capsule (C-contiguous tensors only: Ember buffers are dense)."""
    if not _api.PyCapsule_IsValid(capsule, b"dltensor"):
        raise EmberTypeError("not an unused DLPack capsule")
    managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, b"dltensor"),
                          ctypes.POINTER(_Managed)).contents
    tensor = managed.dl_tensor
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if tensor.strides:
        expected = np.cumprod((1, *shape[::-1]))[:-1][::-1]
        strides = tuple(tensor.strides[i] for i in range(tensor.ndim))
        if any(n > 1 and s != e for n, s, e in zip(shape, strides, expected)):
            raise EmberTypeError(f"DLPack tensor with strides {strides} is not C-contiguous; "
                                 "pass a contiguous copy")
    dtype = _np_dtype(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return Imported((tensor.data or 0) + tensor.byte_offset, shape, dtype,
                    (tensor.device.device_type, tensor.device.device_id), capsule)
