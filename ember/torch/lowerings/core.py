"""Lowerings of the core ATen opset's common ops: elementwise, creation, dtypes, shapes,
indexing, reductions, matrix products, convolutions, normalization and pooling. Each
is written with ``ember.numpy`` and ``ember.lax``, following ATen's dtype promotion and
broadcasting."""
from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

import ember
import ember.numpy as jnp
from ember import dtypes, lax
from ember.errors import EmberValueError
from ember.torch.exchange import numpy_dtype
from ember.torch.lowerings.table import (LOWERINGS, aten, cast, dim_index, lowers,
                                         prims, reduction_dims, register_elementwise)
from ember.torch.promotion import Kind, default_dtype, is_array, promote


# --- elementwise ------------------------------------------------------------------------

register_elementwise({
    (aten.mul.Tensor, aten.mul.Scalar): jnp.multiply,
    (aten.maximum.default,): jnp.maximum,
    (aten.minimum.default,): jnp.minimum,
    (aten.fmod.Tensor, aten.fmod.Scalar): jnp.fmod,
    (aten.remainder.Tensor, aten.remainder.Scalar): jnp.remainder,
    (aten.bitwise_and.Tensor, aten.bitwise_and.Scalar): jnp.bitwise_and,
    (aten.bitwise_or.Tensor, aten.bitwise_or.Scalar): jnp.bitwise_or,
    (aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar): jnp.bitwise_xor,
    (aten.bitwise_not.default,): jnp.bitwise_not,
    (aten.neg.default,): jnp.negative,
    (aten.sign.default, aten.sgn.default): jnp.sign,
    (aten.floor.default,): jnp.floor,
    (aten.ceil.default,): jnp.ceil,
    (aten.trunc.default,): jnp.trunc,
    (aten.round.default,): jnp.round,
    (aten.relu.default,): lambda x: jnp.maximum(x, jnp.zeros((), x.dtype)),
    (aten.fmax.default,): jnp.fmax,
    (aten.fmin.default,): jnp.fmin,
    (aten.copysign.Tensor, aten.copysign.Scalar): jnp.copysign,
    (aten.nextafter.default,): jnp.nextafter,
})
register_elementwise({
    (aten.exp.default,): jnp.exp,
    (aten.exp2.default,): jnp.exp2,
    (aten.expm1.default,): jnp.expm1,
    (aten.log.default,): jnp.log,
    (aten.log1p.default,): jnp.log1p,
    (aten.log2.default,): jnp.log2,
    (aten.log10.default,): jnp.log10,
    (aten.sqrt.default,): jnp.sqrt,
    (aten.rsqrt.default,): lax.rsqrt,
    (aten.reciprocal.default,): jnp.reciprocal,
    (aten.sin.default,): jnp.sin,
    (aten.cos.default,): jnp.cos,
    (aten.tan.default,): jnp.tan,
    (aten.sinh.default,): jnp.sinh,
    (aten.cosh.default,): jnp.cosh,
    (aten.tanh.default,): jnp.tanh,
    (aten.asin.default,): jnp.arcsin,
    (aten.acos.default,): jnp.arccos,
    (aten.atan.default,): jnp.arctan,
    (aten.asinh.default,): jnp.arcsinh,
    (aten.acosh.default,): jnp.arccosh,
    (aten.atanh.default,): jnp.arctanh,
    (aten.erf.default,): lax.erf,
    (aten.erfinv.default,): lax.erf_inv,
    (aten.sigmoid.default,): lax.logistic,
    (aten.atan2.default,): jnp.arctan2,
    (aten.div.Tensor, aten.div.Scalar): jnp.true_divide,
    (aten.erfc.default,): lax.erfc,
    (aten.lgamma.default,): lax.lgamma,
    (aten.digamma.default,): lax.digamma,
    (aten.hypot.default,): jnp.hypot,
}, Kind.INT_TO_FLOAT)
register_elementwise({
    (aten.eq.Tensor, aten.eq.Scalar): jnp.equal,
    (aten.ne.Tensor, aten.ne.Scalar): jnp.not_equal,
    (aten.lt.Tensor, aten.lt.Scalar): jnp.less,
    (aten.le.Tensor, aten.le.Scalar): jnp.less_equal,
    (aten.gt.Tensor, aten.gt.Scalar): jnp.greater,
    (aten.ge.Tensor, aten.ge.Scalar): jnp.greater_equal,
    (aten.logical_and.default,): lambda x, y: jnp.logical_and(x != 0, y != 0),
    (aten.logical_or.default,): lambda x, y: jnp.logical_or(x != 0, y != 0),
    (aten.logical_xor.default,): lambda x, y: jnp.logical_xor(x != 0, y != 0),
    (aten.logical_not.default,): lambda x: x == 0,
    (aten.isnan.default,): jnp.isnan,
    (aten.isinf.default,): jnp.isinf,
    (aten.signbit.default,): jnp.signbit,
}, Kind.ALWAYS_BOOL)
# (the absolute value of a complex tensor is real)
register_elementwise({(aten.abs.default,): jnp.abs}, Kind.COMPLEX_TO_FLOAT)


@lowers(aten.add.Tensor, aten.add.Scalar)
def _add(x: Any, y: Any, alpha: Any = 1) -> Any:
    compute, result = promote(x, y)
    y = cast(y, compute)
    if alpha != 1:
        y = y * cast(alpha, compute)
    return cast(cast(x, compute) + y, result)


@lowers(aten.sub.Tensor, aten.sub.Scalar)
def _sub(x: Any, y: Any, alpha: Any = 1) -> Any:
    compute, result = promote(x, y)
    y = cast(y, compute)
    if alpha != 1:
        y = y * cast(alpha, compute)
    return cast(cast(x, compute) - y, result)


@lowers(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(x: Any, y: Any, *, rounding_mode: str | None = None) -> Any:
    if rounding_mode is None:
        return LOWERINGS[aten.div.Tensor](x, y)
    compute, result = promote(x, y)
    x, y = cast(x, compute), cast(y, compute)
    if dtypes.issubdtype(compute, np.integer):
        quotient = jnp.floor_divide(x, y) if rounding_mode == "floor" \
            else lax.div(*jnp.broadcast_arrays(x, y))  # (C's truncating division)
    else:
        quotient = jnp.floor(x / y) if rounding_mode == "floor" else jnp.trunc(x / y)
    return cast(quotient, result)


@lowers(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def _pow(x: Any, y: Any) -> Any:
    compute, result = promote(x, y)
    if not is_array(y) and float(y) == 2.0:
        x = cast(x, compute)
        return cast(x * x, result)
    return cast(jnp.power(cast(x, compute), cast(y, compute)), result)


@lowers(aten.gelu.default)
def _gelu(x: Any, *, approximate: str = "none") -> Any:
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + jnp.tanh(inner))
    return 0.5 * x * (1 + lax.erf(x * (1 / math.sqrt(2))))


@lowers(aten.leaky_relu.default)
def _leaky_relu(x: Any, negative_slope: float = 0.01) -> Any:
    return jnp.where(x > 0, x, x * negative_slope)


@lowers(aten.elu.default)
def _elu(x: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Any:
    return jnp.where(x > 0, x * scale, jnp.expm1(x * input_scale) * (alpha * scale))


@lowers(aten.hardtanh.default)
def _hardtanh(x: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:
    return _clamp(x, min_val, max_val)


@lowers(aten.where.self)
def _where(condition: Any, x: Any, y: Any) -> Any:
    _, result = promote(x, y)
    return jnp.where(condition, cast(x, result), cast(y, result))


@lowers(aten.clamp.default, aten.clamp.Tensor)
def _clamp(x: Any, min: Any = None, max: Any = None) -> Any:
    _, result = promote(x, min, max)
    out = cast(x, result)
    if min is not None:
        out = jnp.maximum(out, cast(min, result))
    if max is not None:
        out = jnp.minimum(out, cast(max, result))
    return out


# --- creation ---------------------------------------------------------------------------

def _creation_dtype(dtype: torch.dtype | None, fill: Any) -> np.dtype:
    return numpy_dtype(dtype) if dtype is not None else default_dtype(fill)


@lowers(aten.full.default)
def _full(size: Sequence[int], fill_value: Any, *, dtype: torch.dtype | None = None,
          **_placement: Any) -> Any:
    return jnp.full(tuple(size), fill_value, dtype=_creation_dtype(dtype, fill_value))


@lowers(aten.scalar_tensor.default)
def _scalar_tensor(value: Any, *, dtype: torch.dtype | None = None, **_placement: Any) -> Any:
    dtype = numpy_dtype(dtype) if dtype is not None else numpy_dtype(torch.get_default_dtype())
    return jnp.full((), value, dtype=dtype)


@lowers(aten.full_like.default)
def _full_like(x: Any, fill_value: Any, *, dtype: torch.dtype | None = None,
               **_placement: Any) -> Any:
    dtype = numpy_dtype(dtype) if dtype is not None else x.dtype
    return jnp.full(x.shape, fill_value, dtype=dtype)


@lowers(aten._efficientzerotensor.default)
def _zero_tensor(size: Sequence[int], *, dtype: torch.dtype | None = None,
                 **_placement: Any) -> Any:
    """ATen's zero tensor that allocates nothing (a backward's zero gradient): zeros."""
    dtype = numpy_dtype(dtype) if dtype is not None else numpy_dtype(torch.get_default_dtype())
    return jnp.zeros(tuple(size), dtype=dtype)


@lowers(aten.empty.memory_format, aten.empty_permuted.default)
def _empty(size: Sequence[int], *layout: Any, dtype: torch.dtype | None = None,
           **_placement: Any) -> Any:
    """Zeros: an empty tensor's values are unspecified, and any will do."""
    dtype = numpy_dtype(dtype) if dtype is not None else numpy_dtype(torch.get_default_dtype())
    return jnp.zeros(tuple(size), dtype=dtype)


@lowers(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(start: Any, end: Any = None, step: Any = 1, *, dtype: torch.dtype | None = None,
            **_placement: Any) -> Any:
    if end is None:
        start, end = 0, start
    if dtype is None:
        integral = all(isinstance(v, int) for v in (start, end, step))
        dtype = torch.int64 if integral else torch.get_default_dtype()
    count = max(math.ceil((end - start) / step), 0)
    values = start + step * np.arange(count, dtype=np.float64)  # as ATen: in double
    return jnp.asarray(values.astype(numpy_dtype(dtype)))


# --- dtype and layout -------------------------------------------------------------------

@lowers(aten._to_copy.default)
def _to_copy(x: Any, *, dtype: torch.dtype | None = None, **_layout: Any) -> Any:
    return x if dtype is None else cast(x, numpy_dtype(dtype))


@lowers(prims.convert_element_type.default)
def _convert_element_type(x: Any, dtype: torch.dtype) -> Any:
    return cast(x, numpy_dtype(dtype))


@lowers(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default)
def _identity(x: Any, **_memory_format: Any) -> Any:
    return x


@lowers(aten.copy.default)
def _copy(destination: Any, source: Any, non_blocking: bool = False) -> Any:
    return jnp.broadcast_to(cast(source, destination.dtype), destination.shape)


# --- shape ------------------------------------------------------------------------------

@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(x: Any, size: Sequence[int]) -> Any:
    return jnp.reshape(x, tuple(size))


@lowers(aten.permute.default)
def _permute(x: Any, dims: Sequence[int]) -> Any:
    return jnp.transpose(x, tuple(dim_index(d, x.ndim) for d in dims))


@lowers(aten.t.default)
def _t(x: Any) -> Any:
    return x if x.ndim < 2 else jnp.transpose(x)


@lowers(aten.transpose.int)
def _transpose(x: Any, dim0: int, dim1: int) -> Any:
    return jnp.swapaxes(x, dim_index(dim0, x.ndim), dim_index(dim1, x.ndim)) if x.ndim else x


@lowers(aten.expand.default)
def _expand(x: Any, size: Sequence[int], *, implicit: bool = False) -> Any:
    leading = len(size) - x.ndim
    shape = tuple(x.shape[i - leading] if s == -1 else s for i, s in enumerate(size))
    return jnp.broadcast_to(x, shape)


@lowers(aten.unsqueeze.default)
def _unsqueeze(x: Any, dim: int) -> Any:
    return jnp.expand_dims(x, dim % (x.ndim + 1))


@lowers(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(x: Any, dim: Any = None) -> Any:
    # Only squeeze.default (no dim) squeezes every dim: squeeze.dims with [] squeezes
    # none, unlike a reduction's [] (eager returns the input's shape, and AOTAutograd
    # checks an output that views an input against eager's view of it).
    if isinstance(dim, (list, tuple)) and not dim:
        return x
    dims = reduction_dims(dim, x.ndim) if x.ndim else ()
    return jnp.reshape(x, tuple(s for i, s in enumerate(x.shape) if not (i in dims and s == 1)))


@lowers(aten.slice.Tensor)
def _slice(x: Any, dim: int = 0, start: int | None = None, end: int | None = None,
           step: int = 1) -> Any:
    dim = dim_index(dim, x.ndim)
    begin, stop, step = slice(start, end, step).indices(x.shape[dim])
    stop = max(stop, begin)
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[dim], limits[dim], strides[dim] = begin, stop, step
    return lax.slice(x, starts, limits, strides)


@lowers(aten.slice_scatter.default)
def _slice_scatter(x: Any, src: Any, dim: int = 0, start: int | None = None,
                   end: int | None = None, step: int = 1) -> Any:
    """``x`` with its ``aten.slice`` at (dim, start, end, step) replaced by ``src``."""
    dim = dim_index(dim, x.ndim)
    begin, stop, step = slice(start, end, step).indices(x.shape[dim])
    where = [slice(None)] * x.ndim
    where[dim] = slice(begin, max(stop, begin), step)
    return x.at[tuple(where)].set(cast(src, x.dtype))


@lowers(aten.diagonal.default)
def _diagonal(x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    return jnp.diagonal(x, offset, dim_index(dim1, x.ndim), dim_index(dim2, x.ndim))


@lowers(aten.select.int)
def _select(x: Any, dim: int, index: int) -> Any:
    dim = dim_index(dim, x.ndim)
    return lax.index_in_dim(x, index % x.shape[dim], dim, keepdims=False)


@lowers(aten.cat.default)
def _cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    _, result = promote(*tensors)
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]  # ATen's legacy rule
    if not kept:
        return cast(tensors[0], result)
    return jnp.concatenate([cast(t, result) for t in kept], axis=dim_index(dim, kept[0].ndim))


@lowers(aten.split_with_sizes.default)
def _split_with_sizes(x: Any, split_sizes: Sequence[int], dim: int = 0) -> list[Any]:
    dim = dim_index(dim, x.ndim)
    offsets = np.cumsum([0, *split_sizes])
    return [lax.slice_in_dim(x, int(a), int(b), axis=dim) for a, b in itertools.pairwise(offsets)]


@lowers(aten.split.Tensor)
def _split(x: Any, split_size: int, dim: int = 0) -> list[Any]:
    size = x.shape[dim_index(dim, x.ndim)]
    sizes = [min(split_size, size - start) for start in range(0, size, split_size)] or [0]
    return _split_with_sizes(x, sizes, dim)


@lowers(aten.constant_pad_nd.default)
def _constant_pad_nd(x: Any, pad: Sequence[int], value: Any = 0) -> Any:
    config = [(0, 0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        config[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    return lax.pad(x, jnp.asarray(value, dtype=x.dtype), config)


@lowers(aten.flip.default)
def _flip(x: Any, dims: Sequence[int]) -> Any:
    return lax.rev(x, reduction_dims(dims, x.ndim)) if dims else x


# --- indexing ---------------------------------------------------------------------------

@lowers(aten.index.Tensor)
def _index(x: Any, indices: Sequence[Any]) -> Any:
    return x[tuple(slice(None) if i is None else i for i in indices)]


@lowers(aten.index_select.default)
def _index_select(x: Any, dim: int, index: Any) -> Any:
    if x.ndim == 0:
        return x
    return jnp.take(x, index, axis=dim_index(dim, x.ndim))


@lowers(aten.embedding.default)
def _embedding(weight: Any, indices: Any, padding_idx: int = -1, scale_grad_by_freq: bool = False,
               sparse: bool = False) -> Any:
    return jnp.take(weight, indices, axis=0)


@lowers(aten.gather.default)
def _gather(x: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Any:
    if x.ndim == 0:
        return jnp.broadcast_to(x, index.shape)
    if index.size == 0:
        return jnp.zeros(index.shape, x.dtype)
    dim = dim_index(dim, x.ndim)
    limits = [s if d == dim else index.shape[d] for d, s in enumerate(x.shape)]
    return jnp.take_along_axis(lax.slice(x, [0] * x.ndim, limits), index, axis=dim)


def _scatter_positions(index: Any, dim: int) -> tuple[Any, ...]:
    grids = jnp.meshgrid(*[jnp.arange(s) for s in index.shape], indexing="ij")
    return tuple(index if d == dim else grid for d, grid in enumerate(grids))


@lowers(aten.scatter.src, aten.scatter.value)
def _scatter(x: Any, dim: int, index: Any, src: Any) -> Any:
    if x.ndim == 0:
        return cast(src, x.dtype) if is_array(src) else jnp.full((), src, x.dtype)
    dim = dim_index(dim, x.ndim)
    if is_array(src):
        src = lax.slice(src, [0] * src.ndim, list(index.shape))
    return x.at[_scatter_positions(index, dim)].set(cast(src, x.dtype))


@lowers(aten.scatter_add.default)
def _scatter_add(x: Any, dim: int, index: Any, src: Any) -> Any:
    if x.ndim == 0:
        return x + src
    dim = dim_index(dim, x.ndim)
    src = lax.slice(src, [0] * src.ndim, list(index.shape))
    return x.at[_scatter_positions(index, dim)].add(cast(src, x.dtype))


# --- reductions -------------------------------------------------------------------------

def _sum_dtype(x: Any, dtype: torch.dtype | None) -> np.dtype:
    if dtype is not None:
        return numpy_dtype(dtype)
    if dtypes.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_:
        return np.dtype(np.int64)
    return x.dtype


@lowers(aten.sum.dim_IntList, aten.sum.default)
def _sum(x: Any, dim: Any = None, keepdim: bool = False, *,
         dtype: torch.dtype | None = None) -> Any:
    out = _sum_dtype(x, dtype)
    return jnp.sum(cast(x, out), axis=reduction_dims(dim, x.ndim), keepdims=keepdim)


@lowers(aten.hash_tensor.default)
def _hash_tensor(x: Any, dim: Any = (), keepdim: bool = False, *, mode: int = 0) -> Any:
    """ATen's hash (mode 0, the only one): the XOR of the elements' 64-bit patterns, a
    float's as float64, an integer's as int64."""
    if mode != 0:
        raise EmberValueError(f"hash_tensor: mode {mode} is not one ATen defines")
    wide = np.float64 if dtypes.issubdtype(x.dtype, np.inexact) else np.int64
    bits = lax.bitcast_convert_type(cast(x, wide), np.uint64)
    dims = reduction_dims(dim, x.ndim)
    folded = lax.reduce_xor(bits, dims) if dims else bits
    return jnp.expand_dims(folded, dims) if keepdim and dims else folded


@lowers(aten.prod.default, aten.prod.dim_int)
def _prod(x: Any, dim: Any = None, keepdim: bool = False, *,
          dtype: torch.dtype | None = None) -> Any:
    out = _sum_dtype(x, dtype)
    return jnp.prod(cast(x, out), axis=reduction_dims(dim, x.ndim), keepdims=keepdim)


@lowers(aten.mean.dim, aten.mean.default)
def _mean(x: Any, dim: Any = None, keepdim: bool = False, *,
          dtype: torch.dtype | None = None) -> Any:
    out = numpy_dtype(dtype) if dtype is not None else x.dtype
    return jnp.mean(cast(x, out), axis=reduction_dims(dim, x.ndim), keepdims=keepdim)


@lowers(aten.var.correction)
def _var(x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    ddof = 1 if correction is None else correction
    return jnp.var(x, axis=reduction_dims(dim, x.ndim), ddof=ddof, keepdims=keepdim)


@lowers(aten.amax.default)
def _amax(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return jnp.max(x, axis=reduction_dims(dim, x.ndim), keepdims=keepdim)


@lowers(aten.amin.default)
def _amin(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return jnp.min(x, axis=reduction_dims(dim, x.ndim), keepdims=keepdim)


def _arg_reduce(reduce: Callable) -> Callable:
    def lowering(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
        if dim is None:
            index = reduce(jnp.reshape(x, (-1,)), axis=0)
            return jnp.reshape(index, (1,) * x.ndim if keepdim else ()).astype(np.int64)
        if x.ndim == 0:
            return jnp.zeros((), np.int64)
        index = reduce(x, axis=dim_index(dim, x.ndim), keepdims=keepdim)
        return cast(index, np.dtype(np.int64))
    return lowering


LOWERINGS[aten.argmax.default] = _arg_reduce(jnp.argmax)
LOWERINGS[aten.argmin.default] = _arg_reduce(jnp.argmin)


@lowers(aten.max.dim)
def _max_dim(x: Any, dim: int, keepdim: bool = False) -> tuple[Any, Any]:
    axis = reduction_dims(dim, x.ndim)  # (of a 0-d tensor: none)
    return jnp.max(x, axis=axis, keepdims=keepdim), _arg_reduce(jnp.argmax)(x, dim, keepdim)


@lowers(aten.min.dim)
def _min_dim(x: Any, dim: int, keepdim: bool = False) -> tuple[Any, Any]:
    axis = reduction_dims(dim, x.ndim)  # (of a 0-d tensor: none)
    return jnp.min(x, axis=axis, keepdims=keepdim), _arg_reduce(jnp.argmin)(x, dim, keepdim)


@lowers(aten.any.dim, aten.any.dims, aten.any.default)
def _any(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return jnp.any(x != 0, axis=reduction_dims(dim, x.ndim), keepdims=keepdim)


@lowers(aten.all.dim, aten.all.dims, aten.all.default)
def _all(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return jnp.all(x != 0, axis=reduction_dims(dim, x.ndim), keepdims=keepdim)


@lowers(aten.cumsum.default)
def _cumsum(x: Any, dim: int, *, dtype: torch.dtype | None = None) -> Any:
    if x.ndim == 0:
        return cast(x, _sum_dtype(x, dtype))
    return jnp.cumsum(cast(x, _sum_dtype(x, dtype)), axis=dim_index(dim, x.ndim))


@lowers(aten.cumprod.default)
def _cumprod(x: Any, dim: int, *, dtype: torch.dtype | None = None) -> Any:
    if x.ndim == 0:
        return cast(x, _sum_dtype(x, dtype))
    return jnp.cumprod(cast(x, _sum_dtype(x, dtype)), axis=dim_index(dim, x.ndim))


# --- linear algebra ---------------------------------------------------------------------

@lowers(aten.mm.default, aten.bmm.default)
def _mm(x: Any, y: Any) -> Any:
    return jnp.matmul(x, y)


@lowers(aten.addmm.default)
def _addmm(bias: Any, x: Any, y: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    product = jnp.matmul(x, y)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return jnp.broadcast_to(product, product.shape)
    return product + (bias if beta == 1 else bias * beta)


def _per_spatial_dim(values: Sequence[int], spatial: int) -> list[int]:
    """ATen's convolution parameters: one value stands for every spatial dim."""
    return list(values) * spatial if len(values) == 1 else list(values)


def _conv(x: Any, weight: Any, stride: Sequence[int], padding: Sequence[int],
          dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
          groups: int) -> Any:
    spatial = x.ndim - 2
    stride, padding, dilation, output_padding = (
        _per_spatial_dim(v, spatial) for v in (stride, padding, dilation, output_padding))
    names = "DHW"[-spatial:] if spatial else ""
    numbers = lax.conv_dimension_numbers(x.shape, weight.shape,
                                         ("NC" + names, "OI" + names, "NC" + names))
    if not transposed:
        return lax.conv_general_dilated(x, weight, tuple(stride), [(p, p) for p in padding],
                                        rhs_dilation=tuple(dilation), dimension_numbers=numbers,
                                        feature_group_count=groups)
    # A transposed convolution is the gradient of a convolution: dilate the input by the
    # stride and convolve with the flipped kernel, its in/out channels swapped per group.
    kernel = weight.shape[2:]
    in_per_group, out_per_group = weight.shape[0] // groups, weight.shape[1]
    w = jnp.reshape(weight, (groups, in_per_group, out_per_group, *kernel))
    w = jnp.swapaxes(w, 1, 2).reshape((groups * out_per_group, in_per_group, *kernel))
    w = lax.rev(w, tuple(range(2, weight.ndim)))
    pads = [(d * (k - 1) - p, d * (k - 1) - p + op)
            for k, p, d, op in zip(kernel, padding, dilation, output_padding)]
    return lax.conv_general_dilated(x, w, (1,) * spatial, pads, lhs_dilation=tuple(stride),
                                    rhs_dilation=tuple(dilation), dimension_numbers=numbers,
                                    feature_group_count=groups)


@lowers(aten.convolution.default)
def _convolution(x: Any, weight: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                 dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                 groups: int) -> Any:
    out = _conv(x, weight, stride, padding, dilation, transposed, output_padding, groups)
    if bias is not None:
        out = out + jnp.reshape(bias, (1, -1) + (1,) * (out.ndim - 2))
    return out


@lowers(aten.convolution_backward.default)
def _convolution_backward(grad_output: Any, x: Any, weight: Any, bias_sizes: Any,
                          stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                          transposed: bool, output_padding: Sequence[int], groups: int,
                          output_mask: Sequence[bool]) -> tuple[Any, Any, Any]:
    """The gradients by Ember's own vjp of the forward convolution."""
    def forward(x: Any, weight: Any) -> Any:
        return _conv(x, weight, stride, padding, dilation, transposed, output_padding, groups)

    _, pullback = ember.vjp(forward, x, weight)
    grad_x, grad_weight = pullback(grad_output)
    grad_bias = jnp.sum(grad_output, axis=(0, *range(2, grad_output.ndim))) \
        if output_mask[2] else None
    return (grad_x if output_mask[0] else None, grad_weight if output_mask[1] else None,
            grad_bias)


# --- neural-network ops -----------------------------------------------------------------

def _row_max(x: Any, axis: tuple[int, ...]) -> Any:
    """The max along ``axis``, kept (-inf over an empty axis, whose rows are empty anyway)."""
    return jnp.max(x, axis=axis, keepdims=True, initial=-np.inf)


@lowers(aten._softmax.default)
def _softmax(x: Any, dim: int, half_to_float: bool = False) -> Any:
    axis = reduction_dims(dim, x.ndim)  # (none for a 0-d tensor)
    shifted = x - lax.stop_gradient(_row_max(x, axis))
    e = jnp.exp(shifted)
    return e / jnp.sum(e, axis=axis, keepdims=True)


@lowers(aten._log_softmax.default)
def _log_softmax(x: Any, dim: int, half_to_float: bool = False) -> Any:
    axis = reduction_dims(dim, x.ndim)
    shifted = x - lax.stop_gradient(_row_max(x, axis))
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))


def norm_dtypes(x: Any, *params: Any) -> tuple[np.dtype, np.dtype]:
    """``(computation, statistics)`` dtypes of ATen's layer / batch norm: computed in
    float32 for float16 / bfloat16 inputs, the saved statistics in the first parameter's
    dtype (float32 parameters of a bfloat16 input under autocast), else the input's."""
    compute = np.dtype(np.float32) if x.dtype.itemsize < 4 else x.dtype
    stats = next((p.dtype for p in params if p is not None), x.dtype)
    return compute, stats


@lowers(aten.native_layer_norm.default)
def _native_layer_norm(x: Any, normalized_shape: Sequence[int], weight: Any, bias: Any,
                       eps: float) -> tuple[Any, Any, Any]:
    compute, stats = norm_dtypes(x, weight)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    y = cast(x, compute)
    mean = jnp.mean(y, axis=axes, keepdims=True)
    centered = y - mean
    rstd = lax.rsqrt(jnp.mean(centered * centered, axis=axes, keepdims=True) + eps)
    out = centered * rstd
    if weight is not None:
        out = out * cast(weight, compute)
    if bias is not None:
        out = out + cast(bias, compute)
    return cast(out, x.dtype), cast(mean, stats), cast(rstd, stats)


def as_channels(v: Any, ndim: int) -> Any:
    return jnp.reshape(v, (1, -1) + (1,) * (ndim - 2))


def _batch_norm_apply(x: Any, mean: Any, rstd: Any, weight: Any, bias: Any,
                      compute: np.dtype) -> Any:
    out = (x - as_channels(mean, x.ndim)) * as_channels(rstd, x.ndim)
    if weight is not None:
        out = out * as_channels(cast(weight, compute), x.ndim)
    if bias is not None:
        out = out + as_channels(cast(bias, compute), x.ndim)
    return out


@lowers(aten._native_batch_norm_legit_functional.default)
def _batch_norm_functional(x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,
                           training: bool, momentum: float, eps: float) -> tuple[Any, ...]:
    if not training:
        out, save_mean, save_rstd = _batch_norm_no_training(x, weight, bias, running_mean,
                                                             running_var, momentum, eps)
        return out, save_mean, save_rstd, running_mean, running_var
    compute, stats = norm_dtypes(x, weight, running_mean)
    y = cast(x, compute)
    axes = (0, *range(2, x.ndim))
    count = math.prod(x.shape[a] for a in axes)
    mean = jnp.mean(y, axis=axes)
    var = jnp.mean(jnp.square(y - as_channels(mean, x.ndim)), axis=axes)
    rstd = lax.rsqrt(var + eps)
    out = cast(_batch_norm_apply(y, mean, rstd, weight, bias, compute), x.dtype)
    new_mean = (1 - momentum) * running_mean + momentum * cast(mean, running_mean.dtype)
    unbiased = var * (count / max(count - 1, 1))
    new_var = (1 - momentum) * running_var + momentum * cast(unbiased, running_var.dtype)
    return out, cast(mean, stats), cast(rstd, stats), new_mean, new_var


@lowers(aten._native_batch_norm_legit_no_training.default)
def _batch_norm_no_training(x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,
                            momentum: float, eps: float) -> tuple[Any, Any, Any]:
    compute, stats = norm_dtypes(x, weight, running_mean)
    rstd = lax.rsqrt(cast(running_var, compute) + eps)
    out = _batch_norm_apply(cast(x, compute), cast(running_mean, compute), rstd, weight,
                            bias, compute)
    empty = jnp.zeros((0,), stats)
    return cast(out, x.dtype), empty, empty


def pool_geometry(size: int, kernel: int, stride: int, pad: int, dilation: int,
                   ceil_mode: bool) -> tuple[int, int]:
    """ATen's pooled size along one dim, and the right padding that window needs."""
    span = dilation * (kernel - 1) + 1
    numerator = size + 2 * pad - span
    out = (-(-numerator // stride) if ceil_mode else numerator // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    right = max((out - 1) * stride + span - size - pad, 0)
    return out, right


def _pair(value: Sequence[int] | int, default: Sequence[int]) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    if len(value) == 0:
        return tuple(default)
    return (value[0], value[0]) if len(value) == 1 else tuple(value)


@lowers(aten.max_pool2d_with_indices.default)
def _max_pool2d_with_indices(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0,
                             dilation: Any = 1, ceil_mode: bool = False) -> tuple[Any, Any]:
    """Every window position's value as a slice of the padded input, stacked; the max and
    its first position give ATen's values and flat (h * W + w) indices."""
    squeeze = x.ndim == 3
    if squeeze:
        x = x[None]
    kernel = _pair(kernel_size, ())
    strides, pads = _pair(stride, kernel), _pair(padding, (0, 0))
    dilations = _pair(dilation, (1, 1))
    height, width = x.shape[2:]
    (out_h, right_h), (out_w, right_w) = (
        pool_geometry(s, k, st, p, d, ceil_mode)
        for s, k, st, p, d in zip((height, width), kernel, strides, pads, dilations))
    lowest = jnp.asarray(-np.inf if dtypes.issubdtype(x.dtype, np.floating)
                         else np.iinfo(x.dtype).min, dtype=x.dtype)
    padded = lax.pad(x, lowest, [(0, 0, 0), (0, 0, 0), (pads[0], right_h, 0),
                                 (pads[1], right_w, 0)])
    values, positions = [], []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            top, left = i * dilations[0], j * dilations[1]
            values.append(lax.slice(
                padded, (0, 0, top, left),
                (*x.shape[:2], top + (out_h - 1) * strides[0] + 1,
                 left + (out_w - 1) * strides[1] + 1), (1, 1, *strides)))
            rows = np.arange(out_h) * strides[0] + top - pads[0]
            cols = np.arange(out_w) * strides[1] + left - pads[1]
            positions.append(rows[:, None] * width + cols[None, :])
    stacked = jnp.stack(values, axis=-1)
    best = jnp.argmax(stacked, axis=-1)
    out = jnp.max(stacked, axis=-1)
    table = jnp.asarray(np.stack(positions, axis=-1).astype(np.int64))  # (out_h, out_w, k)
    flat = jnp.reshape(table, (-1,))
    cell = np.arange(out_h * out_w).reshape(out_h, out_w) * len(positions)
    indices = jnp.take(flat, jnp.asarray(cell) + best)
    if squeeze:
        out, indices = out[0], indices[0]
    return out, indices


@lowers(aten.max_pool2d_with_indices_backward.default)
def _max_pool2d_with_indices_backward(grad_output: Any, x: Any, kernel_size: Any, stride: Any,
                                      padding: Any, dilation: Any, ceil_mode: bool,
                                      indices: Any) -> Any:
    """Each output's gradient added at its max's flat position, as ATen does."""
    leading = x.shape[:-2]
    plane = x.shape[-2] * x.shape[-1]
    rows = math.prod(leading)
    grads = jnp.reshape(grad_output, (rows, -1))
    where = jnp.reshape(indices, (rows, -1))
    row = jnp.broadcast_to(jnp.arange(rows)[:, None], where.shape)
    grad_x = jnp.zeros((rows, plane), grad_output.dtype).at[row, where].add(grads)
    return jnp.reshape(grad_x, x.shape)


def _attention(query: Any, key: Any, value: Any, is_causal: bool, attn_mask: Any,
               scale: float | None) -> tuple[Any, Any]:
    """Scaled dot-product attention over (..., L, E) queries: the output and the
    logsumexp of each query's scores."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = jnp.matmul(query, jnp.swapaxes(key, -1, -2)) * scale
    if is_causal:
        keep = np.tril(np.ones(scores.shape[-2:], dtype=bool))
        scores = jnp.where(keep, scores, -np.inf)
    if attn_mask is not None:
        scores = jnp.where(attn_mask, scores, -np.inf) if attn_mask.dtype == np.bool_ \
            else scores + attn_mask
    peak = lax.stop_gradient(jnp.max(scores, axis=-1, keepdims=True))
    weights = jnp.exp(scores - peak)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    out = jnp.matmul(weights / total, value)
    return out, (jnp.log(total) + peak)[..., 0]


def _no_dropout(dropout_p: float) -> None:
    if dropout_p:
        raise NotImplementedError("attention dropout runs in PyTorch only; set dropout_p=0 "
                                  "(model.eval()) to compile attention with Ember")


@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _flash_attention(query: Any, key: Any, value: Any, dropout_p: float = 0.0,
                     is_causal: bool = False, *, attn_mask: Any = None,
                     scale: float | None = None) -> tuple[Any, Any]:
    _no_dropout(dropout_p)
    return _attention(query, key, value, is_causal, attn_mask, scale)


@lowers(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _flash_attention_backward(grad_out: Any, query: Any, key: Any, value: Any, out: Any,
                              logsumexp: Any, dropout_p: float, is_causal: bool, *,
                              attn_mask: Any = None, scale: float | None = None
                              ) -> tuple[Any, Any, Any]:
    """The gradients by Ember's vjp of the attention (recomputed, as flash attention's
    backward does)."""
    _no_dropout(dropout_p)

    def forward(q: Any, k: Any, v: Any) -> Any:
        return _attention(q, k, v, is_causal, attn_mask, scale)[0]

    _, pullback = ember.vjp(forward, query, key, value)
    return pullback(grad_out)


# --- Python's own ops in FX graphs ----------------------------------------------------

LOWERINGS[operator.getitem] = operator.getitem

# Sizes of a graph with symbolic shapes (dynamic=True): concrete ints once Ember traces it
# for the shapes it is called with, so Python's own arithmetic computes them. (Written for
# tensors too: ember.torch.stages computes sizes of tensors between its programs.)
LOWERINGS[aten.sym_size.int] = lambda x, dim: x.shape[dim]
LOWERINGS[aten.sym_numel.default] = lambda x: math.prod(x.shape)
for _size_op in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
                 operator.neg, operator.truediv, torch.sym_max, torch.sym_min):
    LOWERINGS[_size_op] = _size_op
