"""Layers as pytrees: parameters are plain array fields, configuration is static.

Each layer is a frozen dataclass registered as a pytree, so ``ember.jit``, ``ember.grad``
and ``ember.vmap`` take layers (and trees of layers) directly, and a checkpoint is just
the tree's leaves. Build one with ``Layer.init(key, ...)``; call it like a function.
Layers that keep running state (BatchNorm) return ``(output, updated_layer)``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import ember.numpy as jnp
from ember import lax, random
from ember.core.pytree import register_dataclass
from ember.nn import activations, initializers


def static(default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field that is configuration (part of the tree structure), not a leaf."""
    return dataclasses.field(default=default, metadata={"static": True})


def layer(cls: type) -> type:
    """Make ``cls`` a frozen dataclass and a pytree (static fields via ``static()``)."""
    return register_dataclass(dataclasses.dataclass(frozen=True)(cls))


@layer
class Linear:
    weight: Any  # (in_features, out_features)
    bias: Any    # (out_features,) or None

    @classmethod
    def init(cls, key: Any, in_features: int, out_features: int, use_bias: bool = True,
             dtype: Any = jnp.float32,
             kernel_init: Callable = initializers.lecun_normal()) -> "Linear":
        weight = kernel_init(key, (in_features, out_features), dtype)
        bias = jnp.zeros((out_features,), dtype) if use_bias else None
        return cls(weight, bias)

    def __call__(self, x: Any) -> Any:
        y = jnp.matmul(x, self.weight.astype(x.dtype))
        return y if self.bias is None else y + self.bias.astype(x.dtype)


@layer
class Embedding:
    table: Any  # (num_embeddings, features)

    @classmethod
    def init(cls, key: Any, num_embeddings: int, features: int, dtype: Any = jnp.float32) -> "Embedding":
        return cls(initializers.normal(1.0)(key, (num_embeddings, features), dtype))

    def __call__(self, ids: Any) -> Any:
        return jnp.take(self.table, ids, axis=0)

    def attend(self, x: Any) -> Any:
        """Logits against every embedding (weight tying for language models)."""
        return jnp.matmul(x, self.table.astype(x.dtype).T)


@layer
class LayerNorm:
    scale: Any
    bias: Any
    eps: float = static(1e-5)

    @classmethod
    def init(cls, features: int, eps: float = 1e-5, dtype: Any = jnp.float32) -> "LayerNorm":
        return cls(jnp.ones((features,), dtype), jnp.zeros((features,), dtype), eps)

    def __call__(self, x: Any) -> Any:
        x32 = x.astype(jnp.float32)
        mean = jnp.mean(x32, axis=-1, keepdims=True)
        centered = x32 - mean
        var = jnp.mean(centered * centered, axis=-1, keepdims=True)
        y = centered * lax.rsqrt(var + self.eps)
        return (y * self.scale + self.bias).astype(x.dtype)


@layer
class RMSNorm:
    scale: Any
    eps: float = static(1e-6)

    @classmethod
    def init(cls, features: int, eps: float = 1e-6, dtype: Any = jnp.float32) -> "RMSNorm":
        return cls(jnp.ones((features,), dtype), eps)

    def __call__(self, x: Any) -> Any:
        x32 = x.astype(jnp.float32)
        y = x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return (y * self.scale).astype(x.dtype)


@layer
class Dropout:
    rate: float = static(0.1)

    def __call__(self, x: Any, key: Any = None, train: bool = True) -> Any:
        if not train or self.rate == 0.0:
            return x
        if key is None:
            raise ValueError("Dropout in training needs a key: dropout(x, key=..., train=True)")
        keep = random.bernoulli(key, 1.0 - self.rate, x.shape)
        return jnp.where(keep, x / (1.0 - self.rate), jnp.zeros_like(x))


@layer
class MLP:
    fc1: Linear
    fc2: Linear
    activation: str = static("gelu")

    @classmethod
    def init(cls, key: Any, features: int, hidden: int, activation: str = "gelu",
             dtype: Any = jnp.float32) -> "MLP":
        k1, k2 = random.split(key)
        return cls(Linear.init(k1, features, hidden, dtype=dtype),
                   Linear.init(k2, hidden, features, dtype=dtype), activation)

    def __call__(self, x: Any) -> Any:
        return self.fc2(getattr(activations, self.activation)(self.fc1(x)))


def causal_mask(length: int) -> Any:
    return jnp.tril(jnp.ones((length, length), dtype=bool))


def dot_product_attention(q: Any, k: Any, v: Any, mask: Any = None) -> Any:
    """softmax(q kᵀ / sqrt(d)) v over (..., heads, length, head_dim) arrays."""
    scores = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.asarray(-1e9, scores.dtype))
    weights = activations.softmax(scores.astype(jnp.float32), axis=-1).astype(v.dtype)
    return jnp.matmul(weights, v)


@layer
class CausalSelfAttention:
    qkv: Linear
    proj: Linear
    num_heads: int = static(1)

    @classmethod
    def init(cls, key: Any, features: int, num_heads: int, dtype: Any = jnp.float32):
        if features % num_heads:
            raise ValueError(f"features ({features}) must be divisible by num_heads ({num_heads})")
        k1, k2 = random.split(key)
        return cls(Linear.init(k1, features, 3 * features, dtype=dtype),
                   Linear.init(k2, features, features, dtype=dtype), num_heads)

    def __call__(self, x: Any) -> Any:
        *batch, length, features = x.shape
        head_dim = features // self.num_heads
        qkv = self.qkv(x).reshape(*batch, length, 3, self.num_heads, head_dim)
        qkv = jnp.moveaxis(qkv, -3, 0)  # (3, ..., length, heads, head_dim)
        q, k, v = (jnp.swapaxes(qkv[i], -2, -3) for i in range(3))  # (..., heads, length, hd)
        out = dot_product_attention(q, k, v, causal_mask(length))
        out = jnp.swapaxes(out, -2, -3).reshape(*batch, length, features)
        return self.proj(out)


@layer
class Conv2d:
    """2-D convolution over NCHW inputs with an OIHW kernel."""

    weight: Any
    bias: Any
    stride: tuple[int, int] = static((1, 1))
    padding: Any = static("SAME")

    @classmethod
    def init(cls, key: Any, in_channels: int, out_channels: int, kernel_size: int | Sequence[int],
             stride: int | Sequence[int] = 1, padding: Any = "SAME", use_bias: bool = True,
             dtype: Any = jnp.float32) -> "Conv2d":
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        init = initializers.variance_scaling(2.0, "fan_in", "truncated_normal", in_axis=1, out_axis=0)
        weight = init(key, (out_channels, in_channels, kh, kw), dtype)
        bias = jnp.zeros((out_channels,), dtype) if use_bias else None
        stride = (stride, stride) if isinstance(stride, int) else tuple(stride)
        return cls(weight, bias, stride, padding)

    def __call__(self, x: Any) -> Any:
        y = lax.conv_general_dilated(x, self.weight.astype(x.dtype), self.stride, self.padding,
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y if self.bias is None else y + self.bias.astype(x.dtype)[:, None, None]


def _pool(x: Any, window: Sequence[int], strides: Sequence[int], reduce: Callable) -> Any:
    """Pool the last two axes (NCHW) with 'VALID' windows, via strided slices."""
    kh, kw = window
    sh, sw = strides
    height, width = x.shape[-2:]
    out_h, out_w = (height - kh) // sh + 1, (width - kw) // sw + 1
    lead = x.shape[:-2]
    pieces = []
    for i in range(kh):
        for j in range(kw):
            start = (0,) * len(lead) + (i, j)
            limit = lead + (i + sh * (out_h - 1) + 1, j + sw * (out_w - 1) + 1)
            pieces.append(lax.slice(x, start, limit, (1,) * len(lead) + (sh, sw)))
    result = pieces[0]
    for piece in pieces[1:]:
        result = reduce(result, piece)
    return result


def max_pool(x: Any, window: Sequence[int] = (2, 2), strides: Sequence[int] | None = None) -> Any:
    return _pool(x, window, strides or window, jnp.maximum)


def avg_pool(x: Any, window: Sequence[int] = (2, 2), strides: Sequence[int] | None = None) -> Any:
    return _pool(x, window, strides or window, jnp.add) / float(window[0] * window[1])


@layer
class MaxPool2d:
    window: tuple[int, int] = static((2, 2))
    strides: tuple[int, int] | None = static(None)

    def __call__(self, x: Any) -> Any:
        return max_pool(x, self.window, self.strides)


@layer
class AvgPool2d:
    window: tuple[int, int] = static((2, 2))
    strides: tuple[int, int] | None = static(None)

    def __call__(self, x: Any) -> Any:
        return avg_pool(x, self.window, self.strides)


@layer
class BatchNorm:
    """Batch normalization over all axes but ``axis`` (channels), with running statistics."""

    scale: Any
    bias: Any
    running_mean: Any
    running_var: Any
    momentum: float = static(0.9)
    eps: float = static(1e-5)
    axis: int = static(1)

    @classmethod
    def init(cls, features: int, momentum: float = 0.9, eps: float = 1e-5, axis: int = 1,
             dtype: Any = jnp.float32) -> "BatchNorm":
        return cls(jnp.ones((features,), dtype), jnp.zeros((features,), dtype),
                   jnp.zeros((features,), jnp.float32), jnp.ones((features,), jnp.float32),
                   momentum, eps, axis)

    def __call__(self, x: Any, train: bool = True) -> tuple[Any, "BatchNorm"]:
        axis = self.axis % x.ndim
        reduce_axes = tuple(a for a in range(x.ndim) if a != axis)
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        x32 = x.astype(jnp.float32)
        if train:
            mean = jnp.mean(x32, axis=reduce_axes)
            var = jnp.var(x32, axis=reduce_axes)
            m = self.momentum
            updated = dataclasses.replace(
                self,
                running_mean=m * self.running_mean + (1 - m) * lax.stop_gradient(mean),
                running_var=m * self.running_var + (1 - m) * lax.stop_gradient(var))
        else:
            mean, var, updated = self.running_mean, self.running_var, self
        y = (x32 - mean.reshape(shape)) * lax.rsqrt(var.reshape(shape) + self.eps)
        y = y * self.scale.reshape(shape) + self.bias.reshape(shape)
        return y.astype(x.dtype), updated


@layer
class Lambda:
    """A parameter-free function (an activation) as a layer, e.g. ``Lambda(nn.relu)``."""

    fn: Callable = static()

    def __call__(self, x: Any) -> Any:
        return self.fn(x)


@layer
class Sequential:
    layers: tuple

    def __call__(self, x: Any) -> Any:
        for item in self.layers:
            x = item(x)
        return x
