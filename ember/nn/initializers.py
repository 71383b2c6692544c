"""Parameter initializers, as ``jax.nn.initializers``: ``init(key, shape, dtype) -> array``."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

import ember.numpy as jnp
from ember import random

Initializer = Callable[..., Any]


def zeros(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
    return jnp.zeros(shape, dtype)


def ones(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
    return jnp.ones(shape, dtype)


def constant(value: float) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
        return jnp.full(shape, value, dtype)

    return init


def normal(stddev: float = 1e-2) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
        return (random.normal(key, shape, jnp.float32) * stddev).astype(dtype)

    return init


def uniform(scale: float = 1e-2) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
        return (random.uniform(key, shape, jnp.float32) * scale).astype(dtype)

    return init


def truncated_normal(stddev: float = 1e-2, lower: float = -2.0, upper: float = 2.0) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
        return (random.truncated_normal(key, lower, upper, shape, jnp.float32) * stddev).astype(dtype)

    return init


def _fans(shape: Sequence[int], in_axis: int = -2, out_axis: int = -1) -> tuple[float, float]:
    if len(shape) < 2:
        size = float(shape[0]) if shape else 1.0
        return size, size
    receptive = float(np.prod(shape)) / (shape[in_axis] * shape[out_axis])
    return shape[in_axis] * receptive, shape[out_axis] * receptive


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int = -2,
                     out_axis: int = -1) -> Initializer:
    """The family behind glorot / he / lecun (as ``jax.nn.initializers.variance_scaling``)."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"mode must be fan_in, fan_out or fan_avg, got {mode!r}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"distribution must be truncated_normal, normal or uniform, "
                         f"got {distribution!r}")

    def init(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
        fan_in, fan_out = _fans(shape, in_axis, out_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        variance = scale / max(denominator, 1.0)
        if distribution == "truncated_normal":
            stddev = math.sqrt(variance) / 0.87962566103423978  # std of N(0,1) cut at ±2
            values = random.truncated_normal(key, -2.0, 2.0, shape, jnp.float32) * stddev
        elif distribution == "normal":
            values = random.normal(key, shape, jnp.float32) * math.sqrt(variance)
        else:
            limit = math.sqrt(3 * variance)
            values = random.uniform(key, shape, jnp.float32, -limit, limit)
        return values.astype(dtype)

    return init


def glorot_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis)


def glorot_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis)


def he_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis)


def he_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis)


def lecun_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis)


def lecun_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal
