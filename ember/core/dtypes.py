"""Dtypes: the set Ember supports, canonicalization and type promotion.

Policy (as JAX): the default float dtype is float32 and the default integer dtype int32.
64-bit types exist only while ``enable_x64`` is on; otherwise they are canonicalized to
their 32-bit counterparts. Python scalars are *weak*: ``x + 1.0`` keeps ``x``'s dtype.
Promotion between arrays follows the Array API standard inside a kind; mixing kinds
goes up the lattice bool < integers < floats < complex, taking the higher operand's
dtype (so int32 + float16 is float16, as in JAX).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.config import config
from ember.errors import EmberTypeError

try:  # bfloat16 is a NumPy extension dtype from the ml_dtypes package (what JAX uses).
    import ml_dtypes

    bfloat16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    bfloat16 = None

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
FLOATS = tuple(t for t in (float16, bfloat16, float32, float64) if t is not None)
COMPLEX = (complex64, complex128)
ALL = (bool_, *SIGNED, *UNSIGNED, *FLOATS, *COMPLEX)

_NARROWED = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}
_BY_NAME = {t.name: t for t in ALL}
_PYTHON_TYPES = {bool: bool_, float: float64, int: int64, complex: complex128}
_BY_NAME.update({t.__name__: dtype for t, dtype in _PYTHON_TYPES.items()})


def is_bfloat16(dtype: np.dtype) -> bool:
    return bfloat16 is not None and dtype == bfloat16


def is_floating(dtype: np.dtype) -> bool:
    return dtype in FLOATS


def is_complex(dtype: np.dtype) -> bool:
    return dtype in COMPLEX


def is_inexact(dtype: np.dtype) -> bool:
    return is_floating(dtype) or is_complex(dtype)


def is_integer(dtype: np.dtype) -> bool:
    return dtype in SIGNED or dtype in UNSIGNED


def is_signed(dtype: np.dtype) -> bool:
    return dtype in SIGNED


def is_unsigned(dtype: np.dtype) -> bool:
    return dtype in UNSIGNED


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


def kind_rank(dtype: np.dtype) -> int:
    """Position on the promotion lattice: bool 0, integers 1, floats 2, complex 3."""
    if is_bool(dtype):
        return 0
    if is_integer(dtype):
        return 1
    if is_floating(dtype):
        return 2
    return 3


def to_dtype(value: Any) -> np.dtype:
    """Turn a user's dtype spec (np.float32, 'float32', ember.numpy.float32, bfloat16) into a dtype."""
    if isinstance(value, str):
        try:
            return _BY_NAME[value]
        except KeyError:
            raise EmberTypeError(
                f"unknown dtype name {value!r}; known: {sorted(t.name for t in ALL)}"
            ) from None
    if isinstance(value, type) and value in _PYTHON_TYPES:
        return _PYTHON_TYPES[value]
    try:
        # A scalar type such as np.int32 has a ``dtype`` descriptor, not a dtype.
        spec = value if isinstance(value, type) else getattr(value, "dtype", value)
        dtype = np.dtype(spec)
    except TypeError:
        raise EmberTypeError(f"{value!r} is not a dtype") from None
    if dtype not in ALL:
        raise EmberTypeError(f"dtype {dtype} is not supported by Ember; supported: "
                             f"{', '.join(t.name for t in ALL)}")
    return dtype


def canonicalize(dtype: Any) -> np.dtype:
    """The dtype actually used: 64-bit types narrow to 32-bit unless enable_x64 is on."""
    dtype = to_dtype(dtype)
    if not config.enable_x64:
        return _NARROWED.get(dtype, dtype)
    return dtype


def default_float() -> np.dtype:
    return float64 if config.enable_x64 else float32


def default_int() -> np.dtype:
    return int64 if config.enable_x64 else int32


def default_complex() -> np.dtype:
    return complex128 if config.enable_x64 else complex64


def python_scalar_dtype(value: Any) -> np.dtype:
    """The dtype a Python scalar gets when it stands alone (no array to follow)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, int):
        return default_int()
    if isinstance(value, float):
        return default_float()
    if isinstance(value, complex):
        return default_complex()
    raise EmberTypeError(f"{type(value).__name__} is not a Python scalar")


def is_weak_scalar(value: Any) -> bool:
    """Python scalars (not NumPy scalars) are weakly typed and follow the other operand."""
    return type(value) in (bool, int, float, complex)


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """Promotion of two strong dtypes (see the module docstring for the rules)."""
    a, b = to_dtype(a), to_dtype(b)
    if a == b:
        return a
    ra, rb = kind_rank(a), kind_rank(b)
    if ra != rb:
        high, low = (a, b) if ra > rb else (b, a)
        if is_complex(high) and low in (float64,):
            return complex128
        return high
    if is_bfloat16(a) or is_bfloat16(b):
        # bfloat16 and float16 have no common 16-bit type: go to float32 (as JAX).
        other = b if is_bfloat16(a) else a
        return float32 if other in (float16, float32) else other
    if is_integer(a) and (is_signed(a) != is_signed(b)):
        if uint64 in (a, b):
            return int64 if config.enable_x64 else int32  # NumPy would go to float64
    return canonicalize(np.promote_types(a, b))


def weak_result(strong: np.dtype, scalar: Any) -> np.dtype:
    """Dtype of ``array op python_scalar``: the array's, unless the scalar is of a higher kind."""
    scalar_rank = kind_rank(python_scalar_dtype(scalar))
    if scalar_rank <= kind_rank(strong):
        return strong
    if scalar_rank == 2:
        return default_float()
    if scalar_rank == 3:
        return complex128 if strong == float64 else default_complex()
    return default_int()


def result_type(*args: Any) -> np.dtype:
    """Result dtype of combining arrays, dtypes and Python scalars (Python scalars are weak)."""
    strong = [to_dtype(a) if not hasattr(a, "dtype") else to_dtype(a.dtype)
              for a in args if not is_weak_scalar(a)]
    weak = [a for a in args if is_weak_scalar(a)]
    if strong:
        dtype = strong[0]
        for other in strong[1:]:
            dtype = promote_types(dtype, other)
    else:
        dtype = python_scalar_dtype(weak[0])
        for scalar in weak[1:]:
            if kind_rank(python_scalar_dtype(scalar)) > kind_rank(dtype):
                dtype = python_scalar_dtype(scalar)
        return dtype
    for scalar in weak:
        dtype = weak_result(dtype, scalar)
    return canonicalize(dtype)


def finfo(dtype: Any):
    dtype = to_dtype(dtype)
    if is_bfloat16(dtype):
        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def iinfo(dtype: Any):
    return np.iinfo(to_dtype(dtype))


def short_name(dtype: np.dtype) -> str:
    """Compact name used by the IR printer: f32, bf16, i32, u8, bool, c64."""
    dtype = np.dtype(dtype)
    if is_bfloat16(dtype):
        return "bf16"
    if dtype == bool_:
        return "bool"
    prefix = {"f": "f", "i": "i", "u": "u", "c": "c"}[dtype.kind]
    return f"{prefix}{dtype.itemsize * 8}"


_BY_SHORT = {short_name(t): t for t in ALL}


def from_short_name(name: str) -> np.dtype:
    try:
        return _BY_SHORT[name]
    except KeyError:
        raise EmberTypeError(f"unknown dtype {name!r} in IR text") from None
