"""Lowerings of ATen's pooling, sampling and normalization ops beyond the common ones, and
of its copying views."""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

import ember
import ember.numpy as jnp
from ember import dtypes, lax
from ember.torch.exchange import numpy_dtype
from ember.torch.lowerings.core import as_channels, norm_dtypes, pool_geometry
from ember.torch.lowerings.table import LOWERINGS, aten, cast, dim_index, lowers


def _gradients(forward: Callable[..., Any], primals: Sequence[Any], cotangent: Any) -> tuple:
    """The gradients of ``forward`` at ``primals`` by Ember's own vjp: ATen's backward ops
    are the pullbacks of the forward lowerings here."""
    _, pullback = ember.vjp(forward, *primals)
    return pullback(cotangent)


# --- copies of views --------------------------------------------------------------------

LOWERINGS[aten.view_copy.default] = LOWERINGS[aten.view.default]


@lowers(aten.view_copy.dtype)
def _view_copy_dtype(x: Any, dtype: torch.dtype) -> Any:
    """``x``'s bits as ``dtype``: a narrower dtype multiplies the last dim, a wider one
    divides it (ATen's ``Tensor.view(dtype)``)."""
    target = numpy_dtype(dtype)
    if target.itemsize == x.dtype.itemsize:
        return lax.bitcast_convert_type(x, target)
    if target.itemsize < x.dtype.itemsize:
        narrow = lax.bitcast_convert_type(x, target)  # (a new last axis of the ratio)
        return jnp.reshape(narrow, (*x.shape[:-1], -1))
    ratio = target.itemsize // x.dtype.itemsize
    return lax.bitcast_convert_type(jnp.reshape(x, (*x.shape[:-1], -1, ratio)), target)


LOWERINGS[aten.permute_copy.default] = LOWERINGS[aten.permute.default]


@lowers(aten.narrow_copy.default)
def _narrow_copy(x: Any, dim: int, start: int, length: int) -> Any:
    dim = dim_index(dim, x.ndim)
    start %= max(x.shape[dim], 1)  # (a negative start counts from the end)
    return lax.slice_in_dim(x, start, start + length, axis=dim)


@lowers(aten.unbind_copy.int)
def _unbind_copy(x: Any, dim: int = 0) -> list[Any]:
    dim = dim_index(dim, x.ndim)
    return [lax.index_in_dim(x, i, dim, keepdims=False) for i in range(x.shape[dim])]


@lowers(aten.new_empty_strided.default)
def _new_empty_strided(x: Any, size: Sequence[int], stride: Sequence[int], *,
                       dtype: torch.dtype | None = None, **_placement: Any) -> Any:
    """Zeros: an empty tensor's values are unspecified, and any will do."""
    return jnp.zeros(tuple(size), numpy_dtype(dtype) if dtype is not None else x.dtype)


@lowers(aten.repeat.default)
def _repeat(x: Any, repeats: Sequence[int]) -> Any:
    return jnp.tile(x, tuple(repeats))


@lowers(aten.unfold.default)
def _unfold(x: Any, dimension: int, size: int, step: int) -> Any:
    """Every ``size``-long window along ``dimension``, ``step`` apart, as a new last dim."""
    if x.ndim == 0:
        return lax.slice(jnp.reshape(x, (1,)), (0,), (size,))
    dim = dim_index(dimension, x.ndim)
    count = (x.shape[dim] - size) // step + 1
    positions = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    windows = jnp.take(x, jnp.asarray(positions), axis=dim)  # (..., count, size, ...)
    return jnp.moveaxis(windows, dim + 1, -1)


def _strided_offsets(size: Sequence[int], stride: Sequence[int],
                     storage_offset: int | None) -> Any:
    """The storage offset of each element of ``as_strided(size, stride, storage_offset)``."""
    offsets = np.full(tuple(size), storage_offset or 0, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        offsets += (np.arange(n, dtype=np.int64) * s).reshape((-1,) + (1,) * (len(size) - d - 1))
    return jnp.asarray(offsets)


# The strided views read a contiguous input: its flattened values are its storage.
@lowers(aten.as_strided.default, aten.as_strided_copy.default)
def _as_strided(x: Any, size: Sequence[int], stride: Sequence[int],
                storage_offset: int | None = None) -> Any:
    return jnp.take(jnp.reshape(x, (-1,)), _strided_offsets(size, stride, storage_offset))


@lowers(aten.as_strided_scatter.default)
def _as_strided_scatter(x: Any, src: Any, size: Sequence[int], stride: Sequence[int],
                        storage_offset: int | None = None) -> Any:
    offsets = _strided_offsets(size, stride, storage_offset)
    flat = jnp.reshape(x, (-1,)).at[offsets].set(cast(src, x.dtype))
    return jnp.reshape(flat, x.shape)


# --- pooling ----------------------------------------------------------------------------

def _per_dim(value: Sequence[int] | int, n: int, default: Sequence[int]) -> tuple[int, ...]:
    """ATen's ``int[n]`` pooling parameter: one value stands for every dim, none for
    ``default``."""
    if isinstance(value, int):
        return (value,) * n
    if len(value) == 0:
        return tuple(default)
    return tuple(value) * n if len(value) == 1 else tuple(value)


def _batched(x: Any, spatial: int) -> tuple[Any, bool]:
    """``x`` with a batch dim (ATen's pools also take an unbatched (C, *spatial) input),
    and whether one was added."""
    return (x[None], True) if x.ndim == spatial + 1 else (x, False)


def _accumulation_dtype(x: Any) -> np.dtype:
    """The dtype ATen's averages sum in: float32 for float16 / bfloat16."""
    narrow_float = dtypes.issubdtype(x.dtype, np.floating) and x.dtype.itemsize < 4
    return np.dtype(np.float32) if narrow_float else x.dtype


def _avg_pool(x: Any, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
              count_include_pad: bool, divisor_override: int | None, spatial: int) -> Any:
    """Windowed sums divided by ATen's divisor: the override, else each window's size
    clipped to the padded input (``count_include_pad``) or to the input itself."""
    x, added = _batched(x, spatial)
    kernel = _per_dim(kernel_size, spatial, ())
    strides = _per_dim(stride, spatial, kernel)
    pads = _per_dim(padding, spatial, (0,) * spatial)
    geometry = [pool_geometry(size, k, s, p, 1, ceil_mode)
                for size, k, s, p in zip(x.shape[2:], kernel, strides, pads)]
    compute = _accumulation_dtype(x)
    zero = jnp.zeros((), compute)
    sums = lax.reduce_window(cast(x, compute), zero, lax.add, (1, 1, *kernel), (1, 1, *strides),
                             [(0, 0), (0, 0)] + [(p, right) for p, (_, right) in zip(pads, geometry)])
    if divisor_override:
        out = sums / cast(divisor_override, compute)
    else:
        divisor = np.ones((), dtype=np.int64)
        for size, k, s, p, (count, _) in zip(x.shape[2:], kernel, strides, pads, geometry):
            starts = np.arange(count) * s - p
            ends = np.minimum(starts + k, size + p)
            if not count_include_pad:
                starts, ends = np.maximum(starts, 0), np.minimum(ends, size)
            divisor = np.multiply.outer(divisor, ends - starts)
        out = sums / jnp.asarray(divisor.astype(compute))
    out = cast(out, x.dtype)
    return out[0] if added else out


@lowers(aten.avg_pool2d.default)
def _avg_pool2d(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0,
                ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: int | None = None) -> Any:
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 2)


@lowers(aten.avg_pool3d.default)
def _avg_pool3d(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0,
                ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: int | None = None) -> Any:
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 3)


def _avg_pool_backward(spatial: int) -> Callable:
    """ATen's ``avg_pool{spatial}d_backward``."""
    def lowering(grad_output: Any, x: Any, kernel_size: Any, stride: Any, padding: Any,
                 ceil_mode: bool, count_include_pad: bool, divisor_override: int | None) -> Any:
        def forward(x: Any) -> Any:
            return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override, spatial)

        (grad,) = _gradients(forward, [x], grad_output)
        return grad
    return lowering


LOWERINGS[aten.avg_pool2d_backward.default] = _avg_pool_backward(2)
LOWERINGS[aten.avg_pool3d_backward.default] = _avg_pool_backward(3)


def _replication_pad(x: Any, padding: Sequence[int]) -> Any:
    """``x`` with its last ``len(padding) // 2`` dims padded by repeating their edges:
    ``padding`` is (before, after) per dim, the last dim first; a negative width crops."""
    for k in range(len(padding) // 2):
        axis = x.ndim - 1 - k
        before, after = padding[2 * k], padding[2 * k + 1]
        size = x.shape[axis]
        positions = jnp.clip(jnp.arange(size + before + after) - before, 0, size - 1)
        x = jnp.take(x, positions, axis=axis)
    return x


def _replication_pad_backward(grad_output: Any, x: Any, padding: Sequence[int]) -> Any:
    """ATen's ``replication_pad{1,2,3}d_backward`` (PyTorch decomposes the forward)."""
    (grad,) = _gradients(lambda x: _replication_pad(x, padding), [x], grad_output)
    return grad


for _backward in (aten.replication_pad1d_backward.default,
                  aten.replication_pad2d_backward.default,
                  aten.replication_pad3d_backward.default):
    LOWERINGS[_backward] = _replication_pad_backward


def _lowest(dtype: np.dtype) -> Any:
    """The identity of max: -inf, or an integer dtype's least value."""
    value = -np.inf if dtypes.issubdtype(dtype, np.floating) else np.iinfo(dtype).min
    return jnp.asarray(value, dtype=dtype)


def _flat_positions(coordinates: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """ATen's flattened spatial index (e.g. ``(d * H + h) * W + w``) of coordinates given
    per dim, each shaped to broadcast against the others."""
    flat = np.zeros((), dtype=np.int64)
    for coordinate, size in zip(coordinates, sizes):
        flat = flat * size + coordinate
    return flat


def _max_with_indices(values: Any, positions: np.ndarray) -> tuple[Any, Any]:
    """The max over the last dim of ``values`` (each window's elements) and the flat
    position (``positions``, broadcasting against ``values``) of its first occurrence."""
    best = jnp.argmax(values, axis=-1)[..., None]
    table = jnp.broadcast_to(jnp.asarray(positions.astype(np.int64)), values.shape)
    return jnp.max(values, axis=-1), jnp.take_along_axis(table, best, axis=-1)[..., 0]


def _max_pool_with_indices(x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                           ceil_mode: bool, spatial: int) -> tuple[Any, Any]:
    """Each window element's values as a strided slice of the padded input; their max and
    its first position give ATen's values and flat indices."""
    x, added = _batched(x, spatial)
    sizes = x.shape[2:]
    kernel = _per_dim(kernel_size, spatial, ())
    strides = _per_dim(stride, spatial, kernel)
    pads = _per_dim(padding, spatial, (0,) * spatial)
    dilations = _per_dim(dilation, spatial, (1,) * spatial)
    geometry = [pool_geometry(*args, ceil_mode)
                for args in zip(sizes, kernel, strides, pads, dilations)]
    out_shape = [count for count, _ in geometry]
    padded = lax.pad(x, _lowest(x.dtype),
                     [(0, 0, 0)] * 2 + [(p, right, 0) for p, (_, right) in zip(pads, geometry)])
    values, positions = [], []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offsets, dilations)]
        limits = [s + (n - 1) * st + 1 for s, n, st in zip(starts, out_shape, strides)]
        values.append(lax.slice(padded, (0, 0, *starts), (*x.shape[:2], *limits),
                                (1, 1, *strides)))
        coordinates = np.meshgrid(*[np.arange(n) * st + s - p for n, st, s, p
                                    in zip(out_shape, strides, starts, pads)], indexing="ij")
        positions.append(_flat_positions(coordinates, sizes))
    out, indices = _max_with_indices(jnp.stack(values, axis=-1),
                                     np.stack(np.broadcast_arrays(*positions), axis=-1))
    return (out[0], indices[0]) if added else (out, indices)


@lowers(aten.max_pool3d_with_indices.default)
def _max_pool3d_with_indices(x: Any, kernel_size: Any, stride: Any = (), padding: Any = 0,
                             dilation: Any = 1, ceil_mode: bool = False) -> tuple[Any, Any]:
    return _max_pool_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode, 3)


def _scatter_to_positions(grad_output: Any, x: Any, indices: Any, spatial: int) -> Any:
    """Each output's gradient added at its flat spatial position (``indices``) of ``x``,
    as ATen's max pools' backward does."""
    leading = x.shape[:x.ndim - spatial]
    rows = math.prod(leading)
    grads = jnp.reshape(grad_output, (rows, -1))
    where = jnp.reshape(indices, (rows, -1))
    row = jnp.broadcast_to(jnp.arange(rows)[:, None], where.shape)
    plane = math.prod(x.shape[x.ndim - spatial:])
    grad_x = jnp.zeros((rows, plane), grad_output.dtype).at[row, where].add(grads)
    return jnp.reshape(grad_x, x.shape)


@lowers(aten.max_pool3d_with_indices_backward.default)
def _max_pool3d_with_indices_backward(grad_output: Any, x: Any, kernel_size: Any, stride: Any,
                                      padding: Any, dilation: Any, ceil_mode: bool,
                                      indices: Any) -> Any:
    return _scatter_to_positions(grad_output, x, indices, 3)


def _adaptive_windows(x: Any, output_size: Sequence[int]) -> tuple[Any, np.ndarray, np.ndarray]:
    """ATen's adaptive pooling windows over the trailing ``len(output_size)`` dims: output
    ``i`` of a dim of size ``n`` pools ``[floor(i n / out), ceil((i + 1) n / out))``.

    Returns every window's values, padded to the longest window by repeating its last
    element, as ``(..., *output_size, K)``; their flat positions ``(*output_size, K)``; and
    which of the ``K`` are the window's own (not repeats)."""
    spatial = len(output_size)
    first = x.ndim - spatial
    sizes = x.shape[first:]
    gathered = x
    coordinates, valid = [], []
    for d, (size, out) in enumerate(zip(sizes, output_size)):
        starts = np.arange(out) * size // out
        ends = -(-(np.arange(out) + 1) * size // out)
        longest = int(np.max(ends - starts)) if out else 0
        candidates = starts[:, None] + np.arange(longest)[None, :]
        index = np.minimum(candidates, ends[:, None] - 1)  # (out, longest)
        gathered = jnp.take(gathered, jnp.asarray(index), axis=first + 2 * d)
        coordinates.append(index)
        valid.append(candidates < ends[:, None])
    # (..., o1, k1, o2, k2, ...) -> (..., o1, o2, ..., k1, k2, ...)
    order = [first + 2 * d for d in range(spatial)] + [first + 2 * d + 1 for d in range(spatial)]
    gathered = jnp.transpose(gathered, (*range(first), *order))
    full = (*output_size, math.prod(c.shape[1] for c in coordinates))
    gathered = jnp.reshape(gathered, (*x.shape[:first], *full))

    def spread(table: np.ndarray, d: int) -> np.ndarray:
        """Dim ``d``'s (out_d, K_d) table shaped to broadcast as (o1, o2, ..., k1, k2, ...)."""
        shape = [1] * (2 * spatial)
        shape[d], shape[spatial + d] = table.shape
        return table.reshape(shape)

    positions = _flat_positions([spread(c, d) for d, c in enumerate(coordinates)], sizes)
    own = np.logical_and.reduce(np.broadcast_arrays(*[spread(v, d) for d, v in enumerate(valid)]))
    return gathered, positions.reshape(full), own.reshape(full)


def _adaptive_avg_pool(x: Any, output_size: Sequence[int]) -> Any:
    values, _, own = _adaptive_windows(cast(x, _accumulation_dtype(x)), output_size)
    sums = jnp.sum(jnp.where(jnp.asarray(own), values, jnp.zeros((), values.dtype)), axis=-1)
    counts = np.sum(own, axis=-1).astype(values.dtype)
    return cast(sums / jnp.asarray(counts), x.dtype)


@lowers(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool_nd(x: Any, output_size: Sequence[int]) -> Any:
    return _adaptive_avg_pool(x, tuple(output_size))


def _adaptive_avg_pool_backward(spatial: int) -> Callable:
    """ATen's ``_adaptive_avg_pool{spatial}d_backward``."""
    def lowering(grad_output: Any, x: Any) -> Any:
        def forward(x: Any) -> Any:
            return _adaptive_avg_pool(x, grad_output.shape[grad_output.ndim - spatial:])

        (grad,) = _gradients(forward, [x], grad_output)
        return grad
    return lowering


LOWERINGS[aten._adaptive_avg_pool2d_backward.default] = _adaptive_avg_pool_backward(2)
LOWERINGS[aten._adaptive_avg_pool3d_backward.default] = _adaptive_avg_pool_backward(3)


@lowers(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def _adaptive_max_pool(x: Any, output_size: Sequence[int]) -> tuple[Any, Any]:
    values, positions, _ = _adaptive_windows(x, tuple(output_size))
    return _max_with_indices(values, positions)


@lowers(aten.adaptive_max_pool2d_backward.default)
def _adaptive_max_pool2d_backward(grad_output: Any, x: Any, indices: Any) -> Any:
    return _scatter_to_positions(grad_output, x, indices, 2)


@lowers(aten.adaptive_max_pool3d_backward.default)
def _adaptive_max_pool3d_backward(grad_output: Any, x: Any, indices: Any) -> Any:
    return _scatter_to_positions(grad_output, x, indices, 3)


# --- normalization ----------------------------------------------------------------------

def _group_norm(x: Any, weight: Any, bias: Any, n: int, channels: int, hxw: int,
                group: int, eps: float) -> tuple[Any, Any, Any]:
    """ATen's group norm of an (N, C, *) input: each sample's channels normalized in
    ``group`` groups; also the (N, group) means and reciprocal standard deviations."""
    compute, stats = norm_dtypes(x, weight)
    grouped = jnp.reshape(cast(x, compute), (n, group, channels // group * hxw))
    mean = jnp.mean(grouped, axis=-1, keepdims=True)
    centered = grouped - mean
    rstd = lax.rsqrt(jnp.mean(centered * centered, axis=-1, keepdims=True) + eps)
    out = jnp.reshape(centered * rstd, x.shape)
    per_channel = (1, channels) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * jnp.reshape(cast(weight, compute), per_channel)
    if bias is not None:
        out = out + jnp.reshape(cast(bias, compute), per_channel)
    return cast(out, x.dtype), cast(mean[..., 0], stats), cast(rstd[..., 0], stats)


@lowers(aten.native_group_norm.default)
def _native_group_norm(x: Any, weight: Any, bias: Any, n: int, channels: int, hxw: int,
                       group: int, eps: float) -> tuple[Any, Any, Any]:
    return _group_norm(x, weight, bias, n, channels, hxw, group, eps)


@lowers(aten._batch_norm_with_update_functional.default)
def _batch_norm_with_update_functional(x: Any, weight: Any, bias: Any, running_mean: Any,
                                       running_var: Any, momentum: float,
                                       eps: float) -> tuple[Any, ...]:
    """Training batch norm; the reserve ATen's CPU kernel returns is empty."""
    functional = LOWERINGS[aten._native_batch_norm_legit_functional.default]
    out, mean, rstd, new_mean, new_var = functional(x, weight, bias, running_mean, running_var,
                                                    True, momentum, eps)
    return out, mean, rstd, jnp.zeros((0,), np.uint8), new_mean, new_var


@lowers(aten.batch_norm_backward.default)
def _batch_norm_backward(grad_out: Any, x: Any, weight: Any, running_mean: Any,
                         running_var: Any, save_mean: Any, save_invstd: Any, train: bool,
                         eps: float, output_mask: Sequence[bool],
                         reserve: Any) -> tuple[Any, Any, Any]:
    """ATen's batch norm gradients: in training from the saved batch statistics (ATen's
    ``save_var`` argument holds 1 / std), else from the running ones, which are constants."""
    compute, _ = norm_dtypes(x, weight)
    if train:
        mean, rstd = cast(save_mean, compute), cast(save_invstd, compute)
    else:
        mean = cast(running_mean, compute)
        rstd = lax.rsqrt(cast(running_var, compute) + eps)
    mean, rstd = as_channels(mean, x.ndim), as_channels(rstd, x.ndim)
    axes = (0, *range(2, x.ndim))
    dy = cast(grad_out, compute)
    normalized = (cast(x, compute) - mean) * rstd
    grad_x = grad_weight = grad_bias = None
    if output_mask[0]:
        g = dy if weight is None else dy * as_channels(cast(weight, compute), x.ndim)
        if train:  # (x^'s gradient g through the batch statistics too)
            g = g - jnp.mean(g, axis=axes, keepdims=True) \
                - normalized * jnp.mean(g * normalized, axis=axes, keepdims=True)
        grad_x = cast(g * rstd, x.dtype)
    parameter = weight.dtype if weight is not None else x.dtype
    if output_mask[1]:
        grad_weight = cast(jnp.sum(dy * normalized, axis=axes), parameter)
    if output_mask[2]:
        grad_bias = cast(jnp.sum(dy, axis=axes), parameter)
    return grad_x, grad_weight, grad_bias


# --- sampling ---------------------------------------------------------------------------

_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2  # ATen's interpolation_mode
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2  # ATen's padding_mode


def _reflect(coordinate: Any, twice_low: int, twice_high: int) -> Any:
    """``coordinate`` reflected into [low, high] (bounds given doubled, as in ATen)."""
    if twice_low == twice_high:
        return jnp.zeros_like(coordinate)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = jnp.abs(coordinate - low)
    extra = jnp.fmod(distance, span)
    flips = jnp.floor(distance / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _padded_coordinate(coordinate: Any, size: int, padding_mode: int,
                       align_corners: bool) -> Any:
    """A pixel coordinate moved inside the input as ``padding_mode`` says (zeros padding
    leaves it: outside points read zeros)."""
    if padding_mode == _ZEROS:
        return coordinate
    if padding_mode == _REFLECTION:
        coordinate = _reflect(coordinate, 0, 2 * (size - 1)) if align_corners \
            else _reflect(coordinate, -1, 2 * size - 1)
    return jnp.clip(coordinate, 0, size - 1)


def _unnormalized(coordinate: Any, size: int, align_corners: bool) -> Any:
    """A grid coordinate in [-1, 1] as a pixel coordinate: -1 and 1 are the corner pixels'
    centres (``align_corners``) or their outer edges."""
    if align_corners:
        return (coordinate + 1) / 2 * (size - 1)
    return ((coordinate + 1) * size - 1) / 2


def _cubic_weights(t: Any) -> list[Any]:
    """The weights of the four taps around a point ``t`` past the second one (ATen's cubic
    convolution, A = -0.75)."""
    a = -0.75

    def near(x: Any) -> Any:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Any) -> Any:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _grid_sample(x: Any, grid: Any, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Any:
    """ATen's grid sampler of an (N, C, *spatial) input at (N, *out, spatial) points."""
    n, channels, *sizes = x.shape
    out_shape = grid.shape[1:-1]
    points = math.prod(out_shape)
    flat = jnp.reshape(x, (n, channels, -1))
    # The grid lists each point's coordinates fastest dim (width) first.
    coordinates = [_unnormalized(grid[..., len(sizes) - 1 - d], size, align_corners)
                   for d, size in enumerate(sizes)]

    def read(pixels: Sequence[Any]) -> Any:
        """The input at integer pixel coordinates (one (N, *out) array per dim), zero
        outside it."""
        inside = jnp.ones(pixels[0].shape, bool)
        index = jnp.zeros(pixels[0].shape, np.int32)
        for pixel, size in zip(pixels, sizes):
            inside = inside & (pixel >= 0) & (pixel < size)
            index = index * size + jnp.clip(pixel, 0, size - 1)
        index = jnp.broadcast_to(jnp.reshape(index, (n, 1, points)), (n, channels, points))
        values = jnp.reshape(jnp.take_along_axis(flat, index, axis=2),
                             (n, channels, *out_shape))
        return jnp.where(inside[:, None], values, jnp.zeros((), x.dtype))

    def integral(value: Any) -> Any:
        return cast(value, np.dtype(np.int32))

    if interpolation_mode == _BICUBIC:  # (2-d only; each tap is padded, not the point)
        lows = [jnp.floor(c) for c in coordinates]
        weights = [_cubic_weights(c - low) for c, low in zip(coordinates, lows)]
        out = jnp.zeros((n, channels, *out_shape), x.dtype)
        for taps in itertools.product(range(4), repeat=len(sizes)):
            pixels = [integral(_padded_coordinate(low - 1 + t, size, padding_mode,
                                                  align_corners))
                      for low, t, size in zip(lows, taps, sizes)]
            weight = math.prod(w[t] for w, t in zip(weights, taps))
            out = out + read(pixels) * weight[:, None]
        return out
    coordinates = [_padded_coordinate(c, size, padding_mode, align_corners)
                   for c, size in zip(coordinates, sizes)]
    if interpolation_mode == _NEAREST:
        return read([integral(jnp.round(c)) for c in coordinates])
    lows = [jnp.floor(c) for c in coordinates]
    out = jnp.zeros((n, channels, *out_shape), x.dtype)
    for corner in itertools.product((0, 1), repeat=len(sizes)):
        weight = math.prod(c - low if bit else 1 - (c - low)
                           for c, low, bit in zip(coordinates, lows, corner))
        out = out + read([integral(low) + bit for low, bit in zip(lows, corner)]) \
            * weight[:, None]
    return out


@lowers(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)
def _grid_sampler(x: Any, grid: Any, interpolation_mode: int, padding_mode: int,
                  align_corners: bool) -> Any:
    return _grid_sample(x, grid, interpolation_mode, padding_mode, align_corners)


@lowers(aten.grid_sampler_2d_backward.default, aten.grid_sampler_3d_backward.default)
def _grid_sampler_backward(grad_output: Any, x: Any, grid: Any, interpolation_mode: int,
                           padding_mode: int, align_corners: bool,
                           output_mask: Sequence[bool]) -> tuple[Any, Any]:
    def forward(x: Any, grid: Any) -> Any:
        return _grid_sample(x, grid, interpolation_mode, padding_mode, align_corners)

    grad_x, grad_grid = _gradients(forward, [x, grid], grad_output)
    return grad_x if output_mask[0] else None, grad_grid


def _antialias_matrix(in_size: int, out_size: int, align_corners: bool, scale: float | None,
                      dtype: np.dtype) -> np.ndarray:
    """ATen's anti-aliased bilinear resampling along one dim as an (out, in) matrix: output
    ``i`` averages the inputs within ``support`` of its centre with triangle weights widened
    by the downscale factor, normalized to sum to one. Computed in ``dtype``, as ATen."""
    real = dtype.type
    if align_corners:
        ratio = real(in_size - 1) / real(out_size - 1) if out_size > 1 else real(0)
    else:
        ratio = real(1 / scale) if scale is not None and scale > 0 else real(in_size) / real(out_size)
    support, inverse = (ratio, real(1) / ratio) if ratio >= 1 else (real(1), real(1))
    widest = math.ceil(support) * 2 + 1
    matrix = np.zeros((out_size, in_size), real)
    for i in range(out_size):
        centre = ratio * real(i + 0.5)
        first = max(int(centre - support + real(0.5)), 0)  # (int() truncates, as ATen's cast)
        count = min(max(min(int(centre + support + real(0.5)), in_size) - first, 0), widest)
        taps = np.arange(first, first + count).astype(real)
        weights = np.maximum(real(1) - np.abs((taps - centre + real(0.5)) * inverse), real(0))
        total = weights.sum(dtype=real)
        matrix[i, first:first + count] = weights / total if total != 0 else weights
    return matrix


def _upsample_antialias(x: Any, output_size: Sequence[int], align_corners: bool,
                        scales_h: float | None, scales_w: float | None) -> Any:
    """The (N, C, H, W) input resampled along H and W by ``_antialias_matrix``."""
    (height, width), (out_h, out_w) = x.shape[2:], output_size
    rows = jnp.asarray(_antialias_matrix(height, out_h, align_corners, scales_h, x.dtype))
    cols = jnp.asarray(_antialias_matrix(width, out_w, align_corners, scales_w, x.dtype))
    return jnp.matmul(jnp.matmul(rows, x), jnp.transpose(cols))


@lowers(aten._upsample_bilinear2d_aa.default)
def _upsample_bilinear2d_aa(x: Any, output_size: Sequence[int], align_corners: bool,
                            scales_h: float | None = None, scales_w: float | None = None) -> Any:
    return _upsample_antialias(x, output_size, align_corners, scales_h, scales_w)


@lowers(aten._upsample_bilinear2d_aa_backward.default)
def _upsample_bilinear2d_aa_backward(grad_output: Any, output_size: Sequence[int],
                                     input_size: Sequence[int], align_corners: bool,
                                     scales_h: float | None = None,
                                     scales_w: float | None = None) -> Any:
    def forward(x: Any) -> Any:
        return _upsample_antialias(x, output_size, align_corners, scales_h, scales_w)

    zeros = jnp.zeros(tuple(input_size), grad_output.dtype)
    (grad,) = _gradients(forward, [zeros], grad_output)
    return grad


# --- embedding bags ---------------------------------------------------------------------

_SUM, _MEAN, _MAX = 0, 1, 2  # ATen's embedding bag modes


@lowers(aten._embedding_bag_forward_only.default, aten._embedding_bag.default)
def _embedding_bag(weight: Any, indices: Any, offsets: Any, scale_grad_by_freq: bool = False,
                   mode: int = _SUM, sparse: bool = False, per_sample_weights: Any = None,
                   include_last_offset: bool = False,
                   padding_idx: int = -1) -> tuple[Any, Any, Any, Any]:
    """Each bag (``indices[offsets[b]:offsets[b + 1]]``) of ``weight``'s rows reduced by
    ``mode``; rows at ``padding_idx`` are left out, and an empty bag gives zeros.

    Also returns what the backward reads: each index's bag, each bag's size, and for max
    bags the index of each column's (first) max (the bag sizes in the other modes)."""
    bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    count, width = indices.shape[0], weight.shape[1]
    position = jnp.arange(count)
    # An index's bag: how many of the later bags start at or before it.
    bag = jnp.sum(offsets[None, 1:bags] <= position[:, None], axis=1).astype(np.int64)
    keep = indices != padding_idx if padding_idx >= 0 else jnp.ones((count,), bool)
    bag_size = jnp.zeros((bags,), np.int64).at[bag].add(keep.astype(np.int64))
    rows = jnp.take(weight, indices, axis=0)
    if per_sample_weights is not None:
        rows = rows * cast(per_sample_weights, weight.dtype)[:, None]
    if mode == _MAX:
        lowest = jnp.full((), -np.inf, weight.dtype)
        peak = jnp.full((bags, width), -np.inf, weight.dtype).at[bag].max(
            jnp.where(keep[:, None], rows, lowest))
        nonempty = (bag_size > 0)[:, None]
        out = jnp.where(nonempty, peak, jnp.zeros((), weight.dtype))
        at_peak = keep[:, None] & (rows == peak[bag])
        first = jnp.full((bags, width), count, np.int64).at[bag].min(
            jnp.where(at_peak, position[:, None], count))
        chosen = jnp.take(indices.astype(np.int64), jnp.minimum(first, count - 1))
        return out, bag, bag_size, jnp.where(nonempty, chosen, 0)
    out = jnp.zeros((bags, width), weight.dtype).at[bag].add(
        jnp.where(keep[:, None], rows, jnp.zeros((), weight.dtype)))
    if mode == _MEAN:
        out = out / jnp.maximum(bag_size, 1).astype(weight.dtype)[:, None]
    return out, bag, bag_size, bag_size


@lowers(aten._embedding_bag_backward.default)
def _embedding_bag_backward(grad: Any, indices: Any, offsets: Any, offset2bag: Any,
                            bag_size: Any, maximum_indices: Any, num_weights: int,
                            scale_grad_by_freq: bool, mode: int, sparse: bool,
                            per_sample_weights: Any, padding_idx: int = -1) -> Any:
    """The (dense) gradient of the embedding bag's ``weight``: each bag's gradient added
    at its max rows (max bags) or at every row it reduced, as weighted in the forward."""
    zeros = jnp.zeros((num_weights, grad.shape[1]), grad.dtype)
    if mode == _MAX:
        nonempty = (bag_size > 0)[:, None]
        column = jnp.broadcast_to(jnp.arange(grad.shape[1])[None, :], maximum_indices.shape)
        return zeros.at[maximum_indices, column].add(
            jnp.where(nonempty, grad, jnp.zeros((), grad.dtype)))
    contribution = jnp.take(grad, offset2bag, axis=0)
    if per_sample_weights is not None:
        contribution = contribution * cast(per_sample_weights, grad.dtype)[:, None]
    if mode == _MEAN:
        sizes = jnp.take(jnp.maximum(bag_size, 1), offset2bag).astype(grad.dtype)
        contribution = contribution / sizes[:, None]
    if scale_grad_by_freq:  # (each row's gradient divided by how often it is looked up)
        frequency = jnp.zeros((num_weights,), grad.dtype).at[indices].add(1)
        contribution = contribution / jnp.take(frequency, indices)[:, None]
    if padding_idx >= 0:
        contribution = jnp.where((indices != padding_idx)[:, None], contribution,
                                 jnp.zeros((), grad.dtype))
    return zeros.at[indices].add(contribution)


@lowers(aten._embedding_bag_per_sample_weights_backward.default)
def _embedding_bag_per_sample_weights_backward(grad: Any, weight: Any, indices: Any,
                                               offsets: Any, offset2bag: Any, mode: int,
                                               padding_idx: int = -1) -> Any:
    """The gradient of each index's weight in a sum bag: its row dotted with its bag's
    gradient (zero for padding)."""
    rows = jnp.take(weight, indices, axis=0)
    out = jnp.sum(rows * jnp.take(grad, offset2bag, axis=0), axis=1)
    if padding_idx >= 0:
        out = jnp.where(indices != padding_idx, out, jnp.zeros((), out.dtype))
    return out

