"""Products: matmul, dot, vdot, inner, outer, tensordot, vecdot, kron, cross, and the
diagonal helpers trace / diagonal / diag.

Every contraction is one ``lax.dot_general`` (batch axes broadcast first, as NumPy's
``matmul``), so backends see a single GEMM-like operation.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axes, canonicalize_axis
from ember.numpy._einsum import einsum
from ember.numpy._manipulation import moveaxis, ravel
from ember.numpy._promotion import (
    broadcast_shapes, broadcast_to_shape, ensure_array, promote_args, result_dtype,
)

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "vecdot", "kron", "cross",
           "trace", "diagonal", "diag", "diagflat", "einsum", "matvec", "vecmat"]


def _operands(a: Any, b: Any) -> tuple[Any, Any, bool]:
    """Both operands in their promoted dtype; bools compute in int32 (see ``_finish``)."""
    dtype = result_dtype(a, b)
    x, y = ensure_array(a, dtype), ensure_array(b, dtype)
    is_bool = dtypes.is_bool(dtype)
    if is_bool:
        x, y = (lax.convert_element_type(v, dtypes.int32) for v in (x, y))
    return x, y, is_bool


def _finish(out: Any, bool_inputs: bool) -> Any:
    if bool_inputs:
        return lax.ne(out, broadcast_to_shape(np.zeros((), out.dtype), out.shape))
    return out


def _dot(x: Any, y: Any, dimension_numbers: Any, precision: Any, preferred: Any) -> Any:
    """One ``dot_general``; ``preferred`` (``preferred_element_type``) sets the result's
    dtype, e.g. float32 products of bfloat16 operands."""
    if preferred is not None:
        preferred = dtypes.canonicalize(preferred)
    return lax.dot_general(x, y, dimension_numbers, precision=precision,
                           preferred_element_type=preferred)


def matmul(x1: Any, x2: Any, /, *, precision: Any = None, preferred_element_type: Any = None):
    """Matrix product with NumPy's rules: 1-D operands are vectors, leading axes broadcast;
    ``preferred_element_type`` sets the result dtype (``precision`` is accepted, as JAX's
    hint, and ignored)."""
    a, b, is_bool = _operands(x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise EmberValueError(f"matmul: operands must be at least 1-D, got shapes {a.shape} "
                              f"and {b.shape} (use multiply for scalars)")
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    if a_vector:
        a = lax.reshape(a, (1, a.shape[0]))
    if b_vector:
        b = lax.reshape(b, (b.shape[0], 1))
    if a.shape[-1] != b.shape[-2]:
        raise EmberValueError(f"matmul: the last axis of {tuple(np.shape(x1))} and the "
                              f"{'first' if b_vector else 'second-to-last'} axis of "
                              f"{tuple(np.shape(x2))} differ ({a.shape[-1]} != {b.shape[-2]})")
    if b.ndim == 2:
        # (..., m, k) @ (k, n): one GEMM over the flattened leading axes, no batch copy
        # of the right operand (as XLA would get from JAX).
        out = _dot(a, b, (((a.ndim - 1,), (0,)), ((), ())), precision, preferred_element_type)
    else:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = broadcast_to_shape(a, batch + a.shape[-2:])
        b = broadcast_to_shape(b, batch + b.shape[-2:])
        nb = len(batch)
        out = _dot(a, b, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))),
                   precision, preferred_element_type)
    if a_vector:
        out = lax.squeeze(out, (out.ndim - 2,))
    if b_vector:
        out = lax.squeeze(out, (out.ndim - 1,))
    return _finish(out, is_bool)


def matvec(x1: Any, x2: Any, /):
    """Matrix-vector product over the last axes, with broadcasting."""
    return lax.squeeze(matmul(x1, lax.expand_dims(ensure_array(x2), (-1,))), (-1,))


def vecmat(x1: Any, x2: Any, /):
    """Vector-matrix product (the vector conjugated), with broadcasting."""
    from ember.numpy._ufuncs import conj

    return lax.squeeze(matmul(lax.expand_dims(conj(x1), (-2,)), x2), (-2,))


def _contract(a: Any, b: Any, a_axes: Sequence[int], b_axes: Sequence[int],
              precision: Any = None, preferred: Any = None) -> Any:
    """``a`` and ``b`` contracted over paired axes; free axes of ``a`` then of ``b``."""
    x, y, is_bool = _operands(a, b)
    for i, j in zip(a_axes, b_axes):
        if x.shape[i] != y.shape[j]:
            raise EmberValueError(f"shapes {x.shape} and {y.shape} are not aligned: axis {i} "
                                  f"({x.shape[i]}) != axis {j} ({y.shape[j]})")
    out = _dot(x, y, ((tuple(a_axes), tuple(b_axes)), ((), ())), precision, preferred)
    return _finish(out, is_bool)


def _scaled(x: Any, y: Any, preferred: Any) -> Any:
    """A product with a scalar operand (``dot`` / ``inner`` of a 0-d array)."""
    from ember.numpy._ufuncs import multiply

    out = multiply(x, y)
    return out if preferred is None else lax.convert_element_type(
        out, dtypes.canonicalize(preferred))


def dot(a: Any, b: Any, out: None = None, *, precision: Any = None,
        preferred_element_type: Any = None):
    """NumPy's ``dot``: scalars multiply; otherwise the last axis of ``a`` meets the
    second-to-last of ``b`` (the only one if ``b`` is 1-D)."""
    x, y = ensure_array(a), ensure_array(b)
    if x.ndim == 0 or y.ndim == 0:
        return _scaled(x, y, preferred_element_type)
    return _contract(x, y, (x.ndim - 1,), (max(y.ndim - 2, 0),), precision,
                     preferred_element_type)


def vdot(a: Any, b: Any, /, *, precision: Any = None, preferred_element_type: Any = None):
    """Dot product of the flattened arrays, the first one conjugated."""
    from ember.numpy._ufuncs import conj

    return dot(conj(ravel(a)), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


def inner(a: Any, b: Any, /, *, precision: Any = None, preferred_element_type: Any = None):
    """Contraction of the last axes of ``a`` and ``b`` (scalars multiply)."""
    x, y = ensure_array(a), ensure_array(b)
    if x.ndim == 0 or y.ndim == 0:
        return _scaled(x, y, preferred_element_type)
    return _contract(x, y, (x.ndim - 1,), (y.ndim - 1,), precision, preferred_element_type)


def outer(a: Any, b: Any, out: None = None):
    """``a[i] * b[j]`` of the flattened arrays."""
    from ember.numpy._ufuncs import multiply

    x, y = ravel(a), ravel(b)
    return multiply(lax.reshape(x, (x.shape[0], 1)), lax.reshape(y, (1, y.shape[0])))


def tensordot(a: Any, b: Any, /, axes: int | Sequence[Any] = 2, *, precision: Any = None,
              preferred_element_type: Any = None):
    """Sum over the last ``axes`` of ``a`` and the first of ``b``, or over explicit pairs."""
    x, y = ensure_array(a), ensure_array(b)
    if isinstance(axes, (int, np.integer)):
        count = operator.index(axes)
        if count < 0 or count > min(x.ndim, y.ndim):
            raise EmberValueError(f"tensordot: axes={count} is out of range for shapes "
                                  f"{x.shape} and {y.shape}")
        a_axes, b_axes = tuple(range(x.ndim - count, x.ndim)), tuple(range(count))
    else:
        if len(axes) != 2:
            raise EmberValueError(f"tensordot: axes must be an int or a pair of axis lists, "
                                  f"got {axes!r}")
        a_axes = canonicalize_axes(axes[0], x.ndim)
        b_axes = canonicalize_axes(axes[1], y.ndim)
        if len(a_axes) != len(b_axes):
            raise EmberValueError(f"tensordot: {len(a_axes)} axes of a paired with "
                                  f"{len(b_axes)} axes of b")
    return _contract(x, y, a_axes, b_axes, precision, preferred_element_type)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None):
    """``sum(conj(x1) * x2, axis)`` with broadcasting (Array API)."""
    from ember.numpy._ufuncs import conj

    a, b, is_bool = _operands(*promote_args(conj(x1), x2))
    axis = canonicalize_axis(axis, a.ndim)
    a, b = moveaxis(a, axis, -1), moveaxis(b, axis, -1)
    nb = a.ndim - 1
    batch = tuple(range(nb))
    return _finish(_dot(a, b, (((nb,), (nb,)), (batch, batch)), precision,
                        preferred_element_type), is_bool)


def kron(a: Any, b: Any):
    """Kronecker product: blocks ``a[i, j] * b``."""
    from ember.numpy._ufuncs import multiply

    x, y = ensure_array(a), ensure_array(b)
    ndim = max(x.ndim, y.ndim)
    x = lax.reshape(x, (1,) * (ndim - x.ndim) + x.shape)
    y = lax.reshape(y, (1,) * (ndim - y.ndim) + y.shape)
    x_expanded = lax.reshape(x, tuple(d for s in x.shape for d in (s, 1)))
    y_expanded = lax.reshape(y, tuple(d for s in y.shape for d in (1, s)))
    product = multiply(x_expanded, y_expanded)
    return lax.reshape(product, tuple(p * q for p, q in zip(x.shape, y.shape)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None):
    """Cross product of 3-vectors (2-vectors are extended with a zero z component)."""
    from ember.numpy._joining import stack
    from ember.numpy._ufuncs import multiply, subtract

    if axis is not None:
        axisa = axisb = axisc = axis
    x, y, _ = _operands(a, b)
    x, y = moveaxis(x, axisa, -1), moveaxis(y, axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise EmberValueError(f"cross: vectors must have 2 or 3 components, got shapes "
                              f"{x.shape} and {y.shape}")
    xs = [x[..., i] for i in range(x.shape[-1])]
    ys = [y[..., i] for i in range(y.shape[-1])]
    if len(xs) == 2 and len(ys) == 2:
        return subtract(multiply(xs[0], ys[1]), multiply(xs[1], ys[0]))
    zero = 0
    x0, x1, x2 = xs + [zero] * (3 - len(xs))
    y0, y1, y2 = ys + [zero] * (3 - len(ys))
    parts = [subtract(multiply(x1, y2), multiply(x2, y1)),
             subtract(multiply(x2, y0), multiply(x0, y2)),
             subtract(multiply(x0, y1), multiply(x1, y0))]
    out = stack(parts, axis=-1)
    return moveaxis(out, -1, axisc)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The ``offset`` diagonal of the planes of ``axis1`` and ``axis2`` (moved to the end).

    The plane is flattened and read with a stride of ``columns + 1``: one static slice.
    """
    x = ensure_array(a)
    if x.ndim < 2:
        raise EmberValueError(f"diagonal needs at least 2 dimensions, got shape {x.shape}")
    i, j = canonicalize_axis(axis1, x.ndim), canonicalize_axis(axis2, x.ndim)
    if i == j:
        raise EmberValueError(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    x = moveaxis(x, (i, j), (-2, -1))
    rows, cols = x.shape[-2:]
    length = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    batch = x.shape[:-2]
    flat = lax.reshape(x, (*batch, rows * cols))
    start = offset if offset >= 0 else -offset * cols
    if length == 0:
        return lax.slice_in_dim(flat, 0, 0, axis=-1)
    stop = start + (length - 1) * (cols + 1) + 1
    return lax.slice_in_dim(flat, start, stop, cols + 1, axis=-1)


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None):
    """Sum of the ``offset`` diagonal."""
    from ember.numpy._reductions import sum as sum_

    return sum_(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v: Any, k: int = 0):
    """The ``k`` diagonal of a 2-D array, or a 2-D array with 1-D ``v`` on diagonal ``k``."""
    x = ensure_array(v)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise EmberValueError(f"diag takes a 1-D or 2-D array, got shape {x.shape}")
    n = x.shape[0] + abs(k)
    shape = (n, n)
    rows = lax.broadcasted_iota(dtypes.int32, shape, 0)
    cols = lax.broadcasted_iota(dtypes.int32, shape, 1)
    on_diagonal = lax.eq(lax.add(rows, int(k)), cols)
    padded = lax.pad(x, np.zeros((), x.dtype), [(0, abs(k), 0)])
    # Along diagonal k >= 0 the row index runs over v; below the main diagonal the column.
    spread = lax.broadcast_in_dim(padded, shape, (0,) if k >= 0 else (1,))
    return lax.select_n(on_diagonal, broadcast_to_shape(np.zeros((), x.dtype), shape), spread)


def diagflat(v: Any, k: int = 0):
    return diag(ravel(v), k)
