"""Array creation: asarray, zeros / ones / full (and *_like), arange, linspace, eye, meshgrid,
tril / triu, from_dlpack.

Default dtypes follow JAX: float32 for floats and int32 for integers unless
``enable_x64`` is on. Shapes and ranges (``arange``'s bounds, ``linspace``'s ``num``)
must be concrete, since they decide the shape of the result; the values of ``linspace``
may be traced.
"""
from __future__ import annotations

import ctypes

import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._promotion import (
    aval, broadcast_to_shape, concrete, inexact_dtype, is_array, is_concrete, promote_args,
    result_dtype, to_operand,
)

__all__ = [
    "asarray", "array", "copy", "zeros", "ones", "empty", "full", "zeros_like", "ones_like",
    "empty_like", "full_like", "arange", "linspace", "logspace", "geomspace", "eye", "identity",
    "tri", "tril", "triu", "meshgrid", "from_dlpack",
]


def _place(out: Any, device: Any) -> Any:
    """Move an eager result to ``device`` (tracers stay where the computation runs)."""
    if device is None or not is_concrete(out):
        return out
    from ember.runtime.dispatch import device_put

    return device_put(out, device)


def _dtype_arg(dtype: Any) -> np.dtype | None:
    return None if dtype is None else dtypes.canonicalize(dtype)


def asarray(obj: Any, dtype: Any = None, *, device: Any = None, copy: bool | None = None):
    """Convert ``obj`` (array, NumPy array, scalar, nested sequence) to an Ember array.

    Ember arrays are immutable, so an Ember array input is returned as is when no
    conversion is needed. ``copy=False`` raises if a conversion or transfer is needed.
    """
    dtype = _dtype_arg(dtype)
    if is_array(obj):
        out = obj if dtype is None else lax.convert_element_type(obj, dtype)
        if copy is False and out is not obj:
            raise EmberValueError(f"asarray(copy=False): converting {obj.dtype} to {dtype} "
                                  "needs a copy")
        return _place(out, device)
    if copy is False:
        raise EmberValueError(
            f"asarray(copy=False): a {type(obj).__name__} is always copied into Ember's "
            "memory; pass copy=None (or True)")
    if isinstance(obj, (list, tuple)) and _contains_array(obj):
        return _place(_stack_nested(obj, dtype), device)
    return _place(_from_host(obj, dtype), device)


def _contains_array(seq: Sequence[Any]) -> bool:
    return any(is_array(v) or (isinstance(v, (list, tuple)) and _contains_array(v)) for v in seq)


def _stack_nested(seq: Sequence[Any], dtype: np.dtype | None):
    """A nested sequence holding traced or Ember arrays, stacked into one array."""
    from ember.numpy._joining import stack

    leaves = list(_flatten(seq))
    common = dtype if dtype is not None else result_dtype(*leaves)
    items = [_stack_nested(v, common) if isinstance(v, (list, tuple)) else
             asarray(to_operand(v, common)) for v in seq]
    return stack(items)


def _flatten(seq: Sequence[Any]):
    for value in seq:
        if isinstance(value, (list, tuple)):
            yield from _flatten(value)
        else:
            yield value


def _from_host(obj: Any, dtype: np.dtype | None):
    from ember.runtime.array import canonical_host
    from ember.runtime.dispatch import device_put

    if dtype is None:
        dtype = aval(obj).dtype
    try:
        host = canonical_host(obj, dtype)
    except OverflowError:
        raise EmberValueError(f"{obj!r:.60} does not fit in {dtype}; pass a wider dtype= "
                              "(64-bit types need ember.config.update('enable_x64', True))"
                              ) from None
    return device_put(host)


def array(object: Any, dtype: Any = None, copy: bool = True, order: str | None = None,
          ndmin: int = 0, *, device: Any = None):
    """NumPy's ``array``: as ``asarray``, with ``ndmin`` leading axes of size 1 added."""
    out = asarray(object, dtype, device=device)
    if out.ndim < ndmin:
        out = lax.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


def copy(a: Any):
    """A copy of ``a`` (Ember arrays are immutable, so this is ``asarray``)."""
    return asarray(a)


def _shape_arg(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (list, tuple)):
        dims = tuple(_dim(d, shape) for d in shape)
    else:
        dims = (_dim(shape, shape),)
    return dims


def _dim(size: Any, shape: Any) -> int:
    try:
        value = operator.index(size)
    except TypeError:
        raise EmberTypeError(f"shape {shape!r} must hold integers; got {size!r}") from None
    if value < 0:
        raise EmberValueError(f"negative dimensions are not allowed: shape {shape!r}")
    return value


def full(shape: Any, fill_value: Any, dtype: Any = None, *, device: Any = None):
    """An array of ``shape`` filled with ``fill_value`` (an array broadcasts to ``shape``)."""
    shape = _shape_arg(shape)
    dtype = _dtype_arg(dtype) or result_dtype(fill_value)
    value = to_operand(fill_value, dtype)
    out = broadcast_to_shape(value, shape)
    return _place(out if is_array(out) else asarray(out), device)


def zeros(shape: Any, dtype: Any = None, *, device: Any = None):
    return full(shape, 0, _dtype_arg(dtype) or dtypes.default_float(), device=device)


def ones(shape: Any, dtype: Any = None, *, device: Any = None):
    return full(shape, 1, _dtype_arg(dtype) or dtypes.default_float(), device=device)


def empty(shape: Any, dtype: Any = None, *, device: Any = None):
    """As ``zeros`` (Ember never hands out uninitialized memory)."""
    return zeros(shape, dtype, device=device)


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *,
              device: Any = None):
    like = aval(a)
    return full(like.shape if shape is None else shape, fill_value,
                _dtype_arg(dtype) or like.dtype, device=device)


def zeros_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None):
    return full_like(a, 0, dtype, shape, device=device)


def ones_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None):
    return full_like(a, 1, dtype, shape, device=device)


def empty_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None):
    return zeros_like(a, dtype, shape, device=device)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *,
           device: Any = None):
    """Evenly spaced values in ``[start, stop)``; the bounds must be concrete."""
    if stop is None and step is None:
        start, stop = 0, start
    step = 1 if step is None else step
    bounds = [_concrete_scalar(v, "arange") for v in (start, stop, step)]
    if bounds[2] == 0:
        raise EmberValueError("arange: step must not be zero")
    dtype = _dtype_arg(dtype) or result_dtype(*bounds)
    length = len(np.arange(*bounds))
    first, delta = bounds[0], bounds[2]
    out = lax.iota(dtype, length)
    if delta != 1:
        out = lax.mul(out, delta)
    if first != 0:
        out = lax.add(out, first)
    return _place(out, device)


def _concrete_scalar(value: Any, what: str) -> Any:
    """A Python scalar from a concrete value (Python scalars stay weak)."""
    if dtypes.is_weak_scalar(value):
        return value
    host = concrete(value, what)
    if host.ndim:
        raise EmberValueError(f"{what} takes scalars, got an array of shape {host.shape}")
    return host.item()


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0, *, device: Any = None):
    """``num`` evenly spaced values from ``start`` to ``stop`` (arrays broadcast)."""
    from ember.numpy._axes import canonicalize_axis
    from ember.numpy._manipulation import moveaxis

    num = operator.index(concrete(num, "linspace(num=...)").item())
    if num < 0:
        raise EmberValueError(f"linspace: num must be non-negative, got {num}")
    dtype = _dtype_arg(dtype)
    compute = inexact_dtype(dtype if dtype is not None else result_dtype(start, stop))
    lo, hi = promote_args(start, stop, dtype=compute)
    bounds_shape = aval(lo).shape
    shape = (num, *bounds_shape)
    divisor = (num - 1) if endpoint else num
    delta = lax.div(lax.sub(hi, lo), float(max(divisor, 1)))
    steps = lax.broadcasted_iota(compute, shape, 0)
    out = lax.add(broadcast_to_shape(lo, shape), lax.mul(steps, broadcast_to_shape(delta, shape)))
    if endpoint and num > 1:
        last = lax.eq(steps, float(num - 1))
        out = lax.select_n(last, out, broadcast_to_shape(hi, shape))
    out = moveaxis(out, 0, canonicalize_axis(axis, len(shape)))
    out = _convert_result(out, dtype or compute)
    if retstep:
        step = delta if divisor > 0 else asarray(np.nan, compute)
        return _place(out, device), step
    return _place(out, device)


def _convert_result(out: Any, dtype: np.dtype):
    if dtypes.is_integer(dtype) and dtypes.is_floating(out.dtype):
        out = lax.floor(out)  # as NumPy: integer results round toward -inf
    return lax.convert_element_type(out, dtype)


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0,
             dtype: Any = None, axis: int = 0):
    """``base ** linspace(start, stop)``."""
    from ember.numpy._math import power

    exponents = linspace(start, stop, num, endpoint, dtype=None, axis=axis)
    out = power(base, exponents)
    return out if dtype is None else _convert_result(out, _dtype_arg(dtype))


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0):
    """Values spaced evenly on a log scale, from ``start`` to ``stop`` (same sign)."""
    from ember.numpy._ufuncs import exp, log

    out = exp(linspace(log(start), log(stop), num, endpoint, axis=axis))
    if dtype is not None:
        out = _convert_result(out, _dtype_arg(dtype))
    return out


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None):
    """Ones on and below diagonal ``k`` of an ``N x M`` array, zeros elsewhere."""
    M = N if M is None else M
    return _convert_result(_lower_mask((N, M), k), _dtype_arg(dtype) or dtypes.default_float())


def _lower_mask(shape: tuple[int, ...], k: int):
    """bool mask of shape ``shape``: True where column <= row + k (last two axes)."""
    rows = lax.broadcasted_iota(dtypes.int32, shape, len(shape) - 2)
    cols = lax.broadcasted_iota(dtypes.int32, shape, len(shape) - 1)
    return lax.ge(lax.add(rows, int(k)), cols)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, *, device: Any = None):
    """Ones on diagonal ``k`` of an ``N x M`` array."""
    M = N if M is None else M
    shape = (operator.index(N), operator.index(M))
    rows = lax.broadcasted_iota(dtypes.int32, shape, 0)
    cols = lax.broadcasted_iota(dtypes.int32, shape, 1)
    on_diagonal = lax.eq(lax.add(rows, int(k)), cols)
    dtype = _dtype_arg(dtype) or dtypes.default_float()
    return _place(lax.convert_element_type(on_diagonal, dtype), device)


def identity(n: int, dtype: Any = None):
    return eye(n, dtype=dtype)


def _triangle(m: Any, k: int, lower: bool, name: str):
    from ember.numpy._promotion import ensure_array

    m = ensure_array(m)
    if m.ndim < 2:
        raise EmberValueError(f"{name} needs an array of at least 2 dimensions, got shape "
                              f"{m.shape}")
    keep = _lower_mask(m.shape, k if lower else k - 1)
    zero = broadcast_to_shape(np.zeros((), m.dtype), m.shape)
    cases = (zero, m) if lower else (m, zero)
    return lax.select_n(keep, *cases)


def tril(m: Any, k: int = 0):
    """``m`` with the elements above diagonal ``k`` zeroed (last two axes)."""
    return _triangle(m, k, True, "tril")


def triu(m: Any, k: int = 0):
    """``m`` with the elements below diagonal ``k`` zeroed (last two axes)."""
    return _triangle(m, k, False, "triu")


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate arrays from 1-D coordinate vectors (``'xy'`` or ``'ij'`` indexing)."""
    from ember.numpy._promotion import ensure_array

    if indexing not in ("xy", "ij"):
        raise EmberValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [ensure_array(x) for x in xi]
    for x in arrays:
        if x.ndim != 1:
            raise EmberValueError(f"meshgrid takes 1-D arrays, got shape {x.shape}")
    sizes = [x.shape[0] for x in arrays]
    if indexing == "xy" and len(arrays) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    outs = []
    for i, x in enumerate(arrays):
        dim = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(arrays) > 1 else i
        if sparse:
            shape = tuple(size if d == dim else 1 for d, size in enumerate(sizes))
            outs.append(lax.reshape(x, shape))
        else:
            outs.append(lax.broadcast_in_dim(x, tuple(sizes), (dim,)))
    return outs


def _bfloat16_from_dlpack(x: Any) -> np.ndarray:
    """A host copy of a producer's bfloat16 tensor, read from its capsule (NumPy has no
    DLPack code for bfloat16)."""
    from ember.backends.dlpack_capsule import KDL_CPU, import_capsule

    if x.__dlpack_device__()[0] != KDL_CPU:
        raise BufferError("a bfloat16 tensor on a device: move it to the host first")
    tensor = import_capsule(x.__dlpack__())
    count = int(np.prod(tensor.shape))
    words = np.ctypeslib.as_array((ctypes.c_uint16 * max(count, 1)).from_address(
        tensor.pointer)) if count else np.zeros(0, np.uint16)
    return words[:count].copy().view(tensor.dtype).reshape(tensor.shape)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None):
    """An Ember array from any object that implements the DLPack protocol."""
    if is_array(x):
        return asarray(x, device=device)
    if not hasattr(x, "__dlpack__"):
        raise EmberTypeError(f"from_dlpack needs an object with __dlpack__, got "
                             f"{type(x).__name__}")
    try:
        host = np.from_dlpack(x) if "bfloat16" not in str(getattr(x, "dtype", "")) else \
            _bfloat16_from_dlpack(x)
    except (BufferError, TypeError, ValueError) as error:
        raise EmberTypeError(f"from_dlpack cannot import {type(x).__name__} of dtype "
                             f"{getattr(x, 'dtype', '?')}: {error}") from None
    return asarray(host, device=device)
