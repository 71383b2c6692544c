"""Sorting: sort, argsort (stable, optionally descending), lexsort, partition."""
from __future__ import annotations

from typing import Any, Sequence

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._manipulation import ravel
from ember.numpy._promotion import broadcast_to_shape, ensure_array, sequence_arg

__all__ = ["sort", "argsort", "lexsort", "partition", "argpartition", "sort_complex"]


def _prepare(a: Any, axis: int | None) -> tuple[Any, int]:
    x = ensure_array(a)
    if axis is None:
        return ravel(x), 0
    if x.ndim == 0:
        raise EmberValueError("cannot sort a 0-d array along an axis (use axis=None)")
    return x, canonicalize_axis(axis, x.ndim)


def _check_order(order: Any) -> None:
    if order is not None:
        raise EmberValueError("sorting with order= (structured arrays) is not supported")


def sort(a: Any, axis: int | None = -1, kind: str | None = None, order: Any = None, *,
         stable: bool = True, descending: bool = False):
    """Sorted copy of ``a`` along ``axis`` (NaNs last when ascending)."""
    _check_order(order)
    x, axis = _prepare(a, axis)
    if descending:
        return lax.rev(lax.sort(lax.rev(x, (axis,)), axis, is_stable=stable), (axis,))
    return lax.sort(x, axis, is_stable=stable)


def _iota_like(x: Any, axis: int) -> Any:
    return lax.broadcasted_iota(dtypes.default_int(), x.shape, axis)


def argsort(a: Any, axis: int | None = -1, kind: str | None = None, order: Any = None, *,
            stable: bool = True, descending: bool = False):
    """Indices that sort ``a`` along ``axis``; ties keep their order (also descending)."""
    _check_order(order)
    x, axis = _prepare(a, axis)
    if not descending:
        return lax.sort((x, _iota_like(x, axis)), axis, is_stable=stable, num_keys=1)[1]
    # Sort the reversed axis stably and read the result backwards: descending order with
    # ties in their original order.
    _, order_of_reversed = lax.sort((lax.rev(x, (axis,)), _iota_like(x, axis)), axis,
                                    is_stable=True, num_keys=1)
    last = broadcast_to_shape(ensure_array(x.shape[axis] - 1, dtypes.default_int()), x.shape)
    return lax.sub(last, lax.rev(order_of_reversed, (axis,)))


def lexsort(keys: Sequence[Any], axis: int = -1):
    """Indices that sort by the last key, then the one before it, and so on."""
    arrays = [ensure_array(k) for k in sequence_arg(keys, "lexsort", "a sequence of key arrays")]
    if not arrays:
        raise EmberValueError("lexsort needs at least one key")
    shapes = {tuple(k.shape) for k in arrays}
    if len(shapes) != 1:
        raise EmberValueError(f"lexsort: keys must share one shape, got {sorted(shapes)}")
    axis = canonicalize_axis(axis, arrays[0].ndim)
    operands = (*arrays[::-1], _iota_like(arrays[0], axis))
    return lax.sort(operands, axis, is_stable=True, num_keys=len(arrays))[-1]


def partition(a: Any, kth: int, axis: int = -1):
    """``a`` with the ``kth`` element in sorted position, smaller ones before it and larger
    ones after (implemented as a full sort, which satisfies that)."""
    return sort(a, axis)


def argpartition(a: Any, kth: int, axis: int = -1):
    """Indices that partition ``a`` around ``kth`` (a full argsort)."""
    return argsort(a, axis)


def sort_complex(a: Any):
    """Sort by real part, then imaginary part; the result is complex."""
    from ember.numpy._promotion import inexact_dtype

    x = ensure_array(a)
    dtype = x.dtype if dtypes.is_complex(x.dtype) else (
        dtypes.complex128 if inexact_dtype(x.dtype) == dtypes.float64 else dtypes.complex64)
    return sort(lax.convert_element_type(x, dtype), axis=0 if x.ndim else None)
