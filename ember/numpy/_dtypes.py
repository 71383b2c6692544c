"""Dtype objects and helpers of ember.numpy (Array API "Data types" and inspection).

``ember.numpy.float32`` and friends are scalar types, as in JAX: they compare and hash
equal to the NumPy dtype (``x.dtype == ember.numpy.float32``), NumPy accepts them
wherever a dtype is expected, and calling one makes an array (``float32(1.5)``).

Promotion follows ``ember.core.dtypes``: the Array API table within a kind, Python
scalars weak, and 64-bit types only with ``ember.config.update("enable_x64", True)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy import (  # abstract type hierarchy, for issubdtype
    complexfloating, floating, generic, inexact, integer, number, signedinteger,
    unsignedinteger,
)

from ember.core import dtypes as _core
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._promotion import aval, is_array

__all__ = [
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bfloat16", "dtype",
    "iinfo", "finfo", "can_cast", "result_type", "promote_types", "isdtype", "issubdtype",
    "astype", "iscomplexobj", "isrealobj", "generic", "number", "integer", "signedinteger",
    "unsignedinteger", "inexact", "floating", "complexfloating", "int_", "uint", "single",
    "double", "csingle", "cdouble", "float_", "complex_", "object_", "character", "flexible",
    "ComplexWarning", "isscalar", "iterable",
]

dtype = np.dtype


class _ScalarMeta(type):
    """Metaclass of the scalar types: equal to their dtype, callable to make arrays."""

    dtype: np.dtype

    def __hash__(cls) -> int:
        return hash(cls.dtype)

    def __eq__(cls, other: Any) -> bool:
        if cls is other:
            return True
        if other is None:  # np.dtype(None) is float64, but None is no dtype
            return False
        try:
            return cls.dtype == np.dtype(other)
        except (TypeError, ValueError):  # not a dtype spec ("x: 1, 2" is a bad format string)
            return False

    def __call__(cls, value: Any):
        from ember.numpy._creation import asarray

        return asarray(value, dtype=cls.dtype)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"ember.numpy.{cls.__name__}"


def _scalar_type(numpy_dtype: np.dtype, name: str | None = None) -> type:
    return _ScalarMeta(name or numpy_dtype.name, (), {"dtype": numpy_dtype})


bool_ = _scalar_type(_core.bool_, "bool")
int8, int16, int32, int64 = map(_scalar_type, _core.SIGNED)
uint8, uint16, uint32, uint64 = map(_scalar_type, _core.UNSIGNED)
float16, float32, float64 = map(_scalar_type, (_core.float16, _core.float32, _core.float64))
complex64, complex128 = map(_scalar_type, _core.COMPLEX)
if _core.bfloat16 is not None:  # needs the ml_dtypes package
    bfloat16 = _scalar_type(_core.bfloat16)
else:  # pragma: no cover - depends on the environment
    __all__.remove("bfloat16")
# NumPy's default integer aliases name 64-bit types; as in JAX they canonicalize to 32 bits
# without x64.
int_, uint = int64, uint64
# NumPy's C-style names (the Python float and complex are 64-bit, as in JAX).
single, double, float_ = float32, float64, float64
csingle, cdouble, complex_ = complex64, complex128, complex128
# Abstract NumPy types with no Ember arrays, kept for code that tests against them.
object_, character, flexible = np.object_, np.character, np.flexible
ComplexWarning = np.exceptions.ComplexWarning


def _to_dtype(value: Any) -> np.dtype:
    """A dtype from a dtype spec or from an array (Array API functions take both)."""
    if is_array(value) or isinstance(value, np.ndarray):
        return value.dtype
    return _core.to_dtype(value)


def iinfo(int_type: Any):
    """Machine limits of an integer dtype (``bits``, ``min``, ``max``, ``dtype``)."""
    dt = _to_dtype(int_type)
    if not _core.is_integer(dt):
        raise EmberValueError(f"iinfo needs an integer dtype, got {dt}")
    return np.iinfo(dt)


class finfo:  # noqa: N801 - NumPy's name
    """Machine limits of a floating or complex dtype.

    The Array API fields are Python numbers, as the standard asks (``bits`` an int;
    ``eps``, ``max``, ``min`` and ``smallest_normal`` floats) and ``dtype`` is the real
    dtype (float32 for complex64); the other fields (``tiny``, ``resolution``,
    ``precision``, ...) are NumPy's (ml_dtypes' for bfloat16).
    """

    def __init__(self, float_type: Any) -> None:
        dt = _to_dtype(float_type)
        if not _core.is_inexact(dt):
            raise EmberValueError(f"finfo needs a floating or complex dtype, got {dt}")
        self._info = _core.finfo(dt)
        self.bits = int(self._info.bits)
        self.eps = float(self._info.eps)
        self.max = float(self._info.max)
        self.min = float(self._info.min)
        self.smallest_normal = float(self._info.smallest_normal)
        self.dtype = np.dtype(self._info.dtype)

    def __getattr__(self, name: str) -> Any:
        if name == "_info":  # not set yet (copying, unpickling)
            raise AttributeError(name)
        return getattr(self._info, name)

    def __repr__(self) -> str:
        return (f"finfo(bits={self.bits}, eps={self.eps!r}, max={self.max!r}, "
                f"min={self.min!r}, smallest_normal={self.smallest_normal!r}, "
                f"dtype={self.dtype})")


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The promoted dtype of arrays, dtypes and (weak) Python scalars."""
    if not arrays_and_dtypes:
        raise EmberValueError("result_type needs at least one array or dtype")
    args = [a if _core.is_weak_scalar(a) else _promotable(a) for a in arrays_and_dtypes]
    return _core.result_type(*args)


def _promotable(value: Any) -> np.dtype:
    if is_array(value) or isinstance(value, (np.ndarray, np.generic, list, tuple)):
        return aval(value).dtype
    return _core.to_dtype(value)


def promote_types(type1: Any, type2: Any) -> np.dtype:
    return _core.canonicalize(_core.promote_types(_core.to_dtype(type1), _core.to_dtype(type2)))


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether ``from_`` (a dtype or array) converts to ``to`` under NumPy's ``casting`` rule."""
    return bool(np.can_cast(_to_dtype(from_), _core.to_dtype(to), casting=casting))


_KINDS = {
    "bool": _core.is_bool,
    "signed integer": _core.is_signed,
    "unsigned integer": _core.is_unsigned,
    "integral": _core.is_integer,
    "real floating": _core.is_floating,
    "complex floating": _core.is_complex,
    "numeric": lambda d: not _core.is_bool(d),
}


def isdtype(dtype: Any, kind: Any) -> bool:
    """Array API ``isdtype``: ``kind`` is a dtype, a kind name, or a tuple of those."""
    dt = _core.to_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise EmberValueError(f"unknown dtype kind {kind!r}; known: {sorted(_KINDS)}")
        return _KINDS[kind](dt)
    return dt == _core.to_dtype(kind)


_ABSTRACT_FLOATS = (floating, inexact, number, generic)


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """``np.issubdtype`` that also places bfloat16 among the floating types."""
    if isinstance(arg2, type) and issubclass(arg2, generic) and arg2 in _ABSTRACT_FLOATS:
        try:
            if _core.is_bfloat16(_core.to_dtype(arg1)):
                return True
        except EmberTypeError:
            pass
    if isinstance(arg1, _ScalarMeta):
        arg1 = arg1.dtype
    if isinstance(arg2, _ScalarMeta):
        arg2 = arg2.dtype
    return bool(np.issubdtype(arg1, arg2))


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None):
    """``x`` converted to ``dtype`` (canonicalized: 64-bit types need x64)."""
    from ember.lax import convert_element_type
    from ember.numpy._promotion import ensure_array

    out = convert_element_type(ensure_array(x), _core.canonicalize(dtype))
    if device is not None:
        from ember.runtime.dispatch import device_put

        out = device_put(out, device)
    return out


def isscalar(element: Any) -> bool:
    """True for Python and NumPy scalars and, as in JAX, for 0-d arrays."""
    if is_array(element) or isinstance(element, np.ndarray):
        return element.ndim == 0
    return bool(np.isscalar(element))


def iterable(y: Any) -> bool:
    """Whether ``iter(y)`` works (0-d arrays are not iterable)."""
    return bool(np.iterable(y))


def iscomplexobj(x: Any) -> bool:
    return _core.is_complex(aval(x).dtype)


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)
