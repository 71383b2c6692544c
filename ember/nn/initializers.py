"""Parameter initializers, as ``jax.nn.initializers``: ``init(key, shape, dtype) -> array``.

Values are drawn in float32 and cast to the requested dtype, so a bfloat16 parameter
holds the rounded float32 draw."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

import ember.numpy as jnp
from ember import random
from ember.errors import EmberValueError

Initializer = Callable[..., Any]


def zeros(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
    return jnp.zeros(shape, dtype)


def ones(key: Any, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
    return jnp.ones(shape, dtype)


def constant(value: float, *, dtype: Any = jnp.float32) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return jnp.full(shape, value, dtype)

    return init


def normal(stddev: float = 1e-2, *, dtype: Any = jnp.float32) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return (random.normal(key, shape, jnp.float32) * stddev).astype(dtype)

    return init


def uniform(scale: float = 1e-2, *, dtype: Any = jnp.float32) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return (random.uniform(key, shape, jnp.float32) * scale).astype(dtype)

    return init


def truncated_normal(stddev: float = 1e-2, lower: float = -2.0, upper: float = 2.0, *,
                     dtype: Any = jnp.float32) -> Initializer:
    """Normal values cut to [lower, upper] standard deviations, times ``stddev``."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        values = random.truncated_normal(key, lower, upper, shape, jnp.float32)
        return (values * stddev).astype(dtype)

    return init


def _fans(shape: Sequence[int], in_axis: int, out_axis: int) -> tuple[float, float]:
    """(fan_in, fan_out) of a parameter shape; other axes form the receptive field."""
    if len(shape) < 2:
        size = float(shape[0]) if shape else 1.0
        return size, size
    receptive = float(np.prod(shape)) / (shape[in_axis] * shape[out_axis])
    return shape[in_axis] * receptive, shape[out_axis] * receptive


_STD_OF_TRUNCATED = 0.87962566103423978  # std of N(0, 1) cut to [-2, 2]


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int = -2,
                     out_axis: int = -1, *, dtype: Any = jnp.float32) -> Initializer:
    """The family behind glorot / he / lecun (as ``jax.nn.initializers.variance_scaling``):
    values of variance ``scale / fan`` where ``fan`` is the shape's fan in, fan out or
    their average (a kernel's receptive field counts into both)."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise EmberValueError(f"mode must be fan_in, fan_out or fan_avg, got {mode!r}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise EmberValueError("distribution must be truncated_normal, normal or uniform, "
                              f"got {distribution!r}")

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        fan_in, fan_out = _fans(shape, in_axis, out_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        stddev = math.sqrt(scale / max(fan, 1.0))
        if distribution == "truncated_normal":
            return truncated_normal(stddev / _STD_OF_TRUNCATED)(key, shape, dtype)
        if distribution == "normal":
            return normal(stddev)(key, shape, dtype)
        limit = math.sqrt(3.0) * stddev
        return random.uniform(key, shape, jnp.float32, -limit, limit).astype(dtype)

    return init


def _family(scale: float, mode: str, distribution: str) -> Callable[..., Initializer]:
    def make(in_axis: int = -2, out_axis: int = -1, *, dtype: Any = jnp.float32) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, dtype=dtype)

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
