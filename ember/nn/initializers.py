"""Parameter initializers, as ``jax.nn.initializers``: ``init(key, shape, dtype) -> array``.

Each maker takes the dtype as its last argument (None: the default float, float64 under
x64), and the initializer it returns may override it. Half-precision values are drawn
in float32 and rounded, so a bfloat16 parameter holds the rounded float32 draw."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

import ember.numpy as jnp
from ember import random
from ember.core import dtypes
from ember.errors import EmberValueError

__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
    "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
    "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
    "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]

Initializer = Callable[..., Any]
Axes = int | Sequence[int]


def _dtype(dtype: Any) -> np.dtype:
    return dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype)


def _draw_dtype(dtype: np.dtype) -> np.dtype:
    """The float dtype to draw in: float32 for half precision, else ``dtype``."""
    if not dtypes.is_floating(dtype):
        raise EmberValueError(f"random initializers make real floating values, not {dtype}")
    return jnp.float32 if dtype.itemsize < 4 else dtype


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    return jnp.zeros(shape, _dtype(dtype))


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    return jnp.ones(shape, _dtype(dtype))


def constant(value: Any, dtype: Any = None) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return jnp.full(shape, value, _dtype(dtype))

    return init


def normal(stddev: float = 1e-2, dtype: Any = None) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        return (random.normal(key, shape, _draw_dtype(dtype)) * stddev).astype(dtype)

    return init


def uniform(scale: float = 1e-2, dtype: Any = None) -> Initializer:
    """Values uniform in [0, scale)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        return (random.uniform(key, shape, _draw_dtype(dtype)) * scale).astype(dtype)

    return init


def truncated_normal(stddev: float = 1e-2, dtype: Any = None, lower: float = -2.0,
                     upper: float = 2.0) -> Initializer:
    """Normal values cut to [lower, upper] standard deviations, times ``stddev``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        values = random.truncated_normal(key, lower, upper, shape, _draw_dtype(dtype))
        return (values * stddev).astype(dtype)

    return init


def _size(shape: Sequence[int], axes: Axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[a] for a in axes)


def _fans(shape: Sequence[int], in_axis: Axes, out_axis: Axes,
          batch_axis: Axes) -> tuple[float, float]:
    """(fan_in, fan_out); axes that are not in, out or batch form the receptive field."""
    if in_axis == -2 and len(shape) <= 1:
        raise EmberValueError(f"variance scaling needs a weight of rank >= 2 with the default "
                              f"in_axis=-2, got shape {tuple(shape)}; pass in_axis explicitly")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive, out_size * receptive


_STD_OF_TRUNCATED = 0.87962566103423978  # std of N(0, 1) cut to [-2, 2]
_FANS = {
    "fan_in": lambda fan_in, fan_out: fan_in,
    "fan_out": lambda fan_in, fan_out: fan_out,
    "fan_avg": lambda fan_in, fan_out: (fan_in + fan_out) / 2,
    "fan_geo_avg": lambda fan_in, fan_out: math.sqrt(fan_in * fan_out),
}


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (),
                     dtype: Any = None) -> Initializer:
    """The family behind glorot / he / lecun (as ``jax.nn.initializers.variance_scaling``):
    values of variance ``scale / n``, where ``n`` is the fan in, fan out, or their
    arithmetic or geometric mean (a kernel's receptive field counts into both)."""
    if mode not in _FANS:
        raise EmberValueError(f"variance_scaling: mode must be one of {sorted(_FANS)}, got "
                              f"{mode!r}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise EmberValueError("variance_scaling: distribution must be truncated_normal, "
                              f"normal or uniform, got {distribution!r}")

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = tuple(int(d) for d in shape)
        stddev = math.sqrt(scale / _FANS[mode](*_fans(shape, in_axis, out_axis, batch_axis)))
        if distribution == "truncated_normal":
            return truncated_normal(stddev / _STD_OF_TRUNCATED)(key, shape, dtype)
        if distribution == "normal":
            return normal(stddev)(key, shape, dtype)
        dtype = _dtype(dtype)
        limit = math.sqrt(3.0) * stddev
        return random.uniform(key, shape, _draw_dtype(dtype), -limit, limit).astype(dtype)

    return init


def _family(scale: float, mode: str, distribution: str) -> Callable[..., Initializer]:
    def make(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
             dtype: Any = None) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis,
                                dtype)

    make.__doc__ = f"``variance_scaling({scale}, {mode!r}, {distribution!r})``."
    return make


glorot_uniform = _family(1.0, "fan_avg", "uniform")
glorot_normal = _family(1.0, "fan_avg", "truncated_normal")
he_uniform = _family(2.0, "fan_in", "uniform")
he_normal = _family(2.0, "fan_in", "truncated_normal")
lecun_uniform = _family(1.0, "fan_in", "uniform")
lecun_normal = _family(1.0, "fan_in", "truncated_normal")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def _orthonormal(key: Any, rows: int, cols: int, dtype: np.dtype) -> Any:
    """A (rows, cols) matrix with orthonormal rows or columns (whichever are fewer),
    uniformly distributed: the QR factor of a Gaussian matrix, with the signs of R's
    diagonal moved into Q so that the distribution does not depend on QR's sign choice."""
    tall = (max(rows, cols), min(rows, cols))
    q, r = jnp.linalg.qr(random.normal(key, tall, _draw_dtype(dtype)))
    q = q * jnp.sign(jnp.diagonal(r))
    return (q if rows >= cols else q.T).astype(dtype)


def orthogonal(scale: float = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """Weights whose slices along ``column_axis`` (the columns, all other axes flattened
    into rows) are orthonormal, times ``scale`` (as ``jax.nn.initializers.orthogonal``)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape, dtype = tuple(int(d) for d in shape), _dtype(dtype)
        if len(shape) < 2:
            raise EmberValueError(f"orthogonal initializer needs a shape of rank >= 2, got "
                                  f"{shape}")
        if 0 in shape:
            return jnp.zeros(shape, dtype)
        cols = shape[column_axis]
        matrix = _orthonormal(key, math.prod(shape) // cols, cols, dtype)
        others = tuple(np.delete(shape, column_axis))
        return scale * jnp.moveaxis(matrix.reshape(others + (cols,)), -1, column_axis)

    return init


def delta_orthogonal(scale: float = 1.0, column_axis: int = -1,
                     dtype: Any = None) -> Initializer:
    """Convolution kernels (3-d to 5-d, channels last) that are zero except an orthogonal
    (in, out) matrix at the spatial centre (as ``jax.nn.initializers.delta_orthogonal``)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape, dtype = tuple(int(d) for d in shape), _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise EmberValueError(f"delta_orthogonal needs a 3-d, 4-d or 5-d kernel shape, "
                                  f"got {shape}")
        if shape[-1] < shape[-2]:
            raise EmberValueError(f"delta_orthogonal: fan_in (shape[-2] = {shape[-2]}) must "
                                  f"be at most fan_out (shape[-1] = {shape[-1]})")
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        matrix = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
        return jnp.zeros(shape, dtype).at[centre].set(matrix)

    return init
