"""Layers as pytrees: parameters are plain array fields, configuration is static.

Each layer is a frozen dataclass registered as a pytree, so ``ember.jit``, ``ember.grad``
and ``ember.vmap`` take layers (and trees of layers) directly, and a checkpoint is just
the tree's leaves. Layers with random parameters are built with ``Layer.init(key, ...)``,
the others with ``Layer.init(...)`` (norms) or their constructor (Dropout, pools, Lambda).
Call a layer like a function. BatchNorm, the one layer with running state, returns
``(output, updated_layer)``.

Layers compute in the dtype of the arrays they are given: for mixed precision, cast
the model with ``Policy.cast_to_compute(model)`` (``ember.mixed_precision``). Norms
compute their statistics (and attention its softmax) in float32 at least.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import ember
import ember.numpy as jnp
from ember import lax, random
from ember.core.pytree import register_dataclass
from ember.errors import EmberValueError
from ember.nn import activations, initializers

__all__ = ["Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "MLP",
           "CausalSelfAttention", "Conv2d", "MaxPool2d", "AvgPool2d", "BatchNorm",
           "Sequential", "Lambda", "dot_product_attention", "max_pool", "avg_pool",
           "layer", "static"]


def static(default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field that is configuration (part of the tree structure), not a leaf."""
    return dataclasses.field(default=default, metadata={"static": True})


def layer(cls: type) -> type:
    """Make ``cls`` a frozen dataclass and a pytree (static fields via ``static()``)."""
    return register_dataclass(dataclasses.dataclass(frozen=True)(cls))


def _at_least_float32(x: Any) -> Any:
    """``x`` in float32, or wider if it already is (statistics and softmax in low precision
    lose too much)."""
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def _pair(value: int | Sequence[int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


@layer
class Linear:
    """``x @ weight + bias`` with a (in_features, out_features) weight."""

    weight: Any
    bias: Any  # (out_features,) or None

    @classmethod
    def init(cls, key: Any, in_features: int, out_features: int, use_bias: bool = True,
             dtype: Any = jnp.float32,
             kernel_init: Callable = initializers.lecun_normal()) -> "Linear":
        weight = kernel_init(key, (in_features, out_features), dtype)
        return cls(weight, jnp.zeros((out_features,), dtype) if use_bias else None)

    def __call__(self, x: Any) -> Any:
        y = jnp.dot(x, self.weight)  # one contraction, leading axes of x kept (no broadcast)
        return y if self.bias is None else y + self.bias


@layer
class Embedding:
    """A (num_embeddings, features) table looked up by integer ids."""

    table: Any

    @classmethod
    def init(cls, key: Any, num_embeddings: int, features: int, dtype: Any = jnp.float32,
             embedding_init: Callable = initializers.normal(1.0)) -> "Embedding":
        return cls(embedding_init(key, (num_embeddings, features), dtype))

    def __call__(self, ids: Any) -> Any:
        return jnp.take(self.table, ids, axis=0)

    def attend(self, x: Any) -> Any:
        """Logits against every embedding (weight tying for language models)."""
        return jnp.einsum("...f,vf->...v", x, self.table)


@layer
class LayerNorm:
    """Normalize the last axis to zero mean and unit variance, then scale and shift."""

    scale: Any
    bias: Any
    eps: float = static(1e-5)

    @classmethod
    def init(cls, features: int, eps: float = 1e-5, dtype: Any = jnp.float32) -> "LayerNorm":
        return cls(jnp.ones((features,), dtype), jnp.zeros((features,), dtype), eps)

    def __call__(self, x: Any) -> Any:
        wide = _at_least_float32(x)
        centered = wide - jnp.mean(wide, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(centered), axis=-1, keepdims=True)
        y = centered * lax.rsqrt(var + self.eps)
        return (y * self.scale + self.bias).astype(x.dtype)


@layer
class RMSNorm:
    """Divide the last axis by its root mean square, then scale (no centering)."""

    scale: Any
    eps: float = static(1e-6)

    @classmethod
    def init(cls, features: int, eps: float = 1e-6, dtype: Any = jnp.float32) -> "RMSNorm":
        return cls(jnp.ones((features,), dtype), eps)

    def __call__(self, x: Any) -> Any:
        wide = _at_least_float32(x)
        y = wide * lax.rsqrt(jnp.mean(jnp.square(wide), axis=-1, keepdims=True) + self.eps)
        return (y * self.scale).astype(x.dtype)


@layer
class Dropout:
    """Zero each element with probability ``rate`` in training, scaling the rest up."""

    rate: float = static(0.1)

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate < 1.0:
            raise EmberValueError(f"Dropout rate must be in [0, 1), got {self.rate}")

    def __call__(self, x: Any, key: Any = None, train: bool = True) -> Any:
        if not train or self.rate == 0.0:
            return x
        if key is None:
            raise EmberValueError("Dropout in training needs a key: dropout(x, key=..., "
                                  "train=True), or train=False for evaluation")
        keep = random.bernoulli(key, 1.0 - self.rate, x.shape)
        return jnp.where(keep, x / (1.0 - self.rate), jnp.zeros_like(x))


@layer
class MLP:
    """``fc2(activation(fc1(x)))``; ``activation`` names a function of ``ember.nn``."""

    fc1: Linear
    fc2: Linear
    activation: str = static("gelu")

    @classmethod
    def init(cls, key: Any, features: int, hidden: int, activation: str = "gelu",
             dtype: Any = jnp.float32) -> "MLP":
        if not callable(getattr(activations, activation, None)):
            raise EmberValueError(f"unknown activation {activation!r}; use a function name "
                                  "from ember.nn such as 'gelu' or 'relu'")
        k1, k2 = random.split(key)
        return cls(Linear.init(k1, features, hidden, dtype=dtype),
                   Linear.init(k2, hidden, features, dtype=dtype), activation)

    def __call__(self, x: Any) -> Any:
        return self.fc2(getattr(activations, self.activation)(self.fc1(x)))


def _large_negative(dtype: Any) -> Any:
    """Masked logits: very negative but finite even once cast to float32 (as JAX)."""
    return -0.7 * min(float(jnp.finfo(dtype).max), float(jnp.finfo(jnp.float32).max))


def _attention_mask(lead: tuple, num_heads: int, length_q: int, length_kv: int, mask: Any,
                    is_causal: bool, q_lengths: Any, kv_lengths: Any,
                    window: tuple[int, int] | None) -> Any:
    """Where query t may attend key s, broadcastable to (..., N, T, S); None: everywhere."""
    combined = None if mask is None else jnp.asarray(mask, dtype=bool)

    def both(extra: Any) -> Any:
        return extra if combined is None else jnp.logical_and(combined, extra)

    t = jnp.arange(length_q)[:, None]
    s = jnp.arange(length_kv)[None, :]
    if is_causal:
        combined = both(s <= t)
    if window is not None:
        left, right = window
        combined = both((t <= s + left) & (t >= s - right))
    if q_lengths is not None:
        combined = both(t < jnp.asarray(q_lengths)[..., None, None, None])
    if kv_lengths is not None:
        combined = both(s < jnp.asarray(kv_lengths)[..., None, None, None])
    return combined


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None,
                          mask: Any = None, *, scale: float | None = None,
                          is_causal: bool = False, query_seq_lengths: Any = None,
                          key_value_seq_lengths: Any = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None,
                          return_residual: bool = False) -> Any:
    """Scaled dot-product attention as ``jax.nn.dot_product_attention``.

    ``query`` is (..., T, N, H) (T positions, N heads, H features per head); ``key`` and
    ``value`` are (..., S, K, H) with K dividing N (grouped-query attention: each key
    head serves N / K query heads). ``bias`` is added to and ``mask`` (True = attend)
    selects among the logits, both broadcastable to (..., N, T, S). ``is_causal``,
    ``local_window_size`` ((left, right), or one int for both) and the sequence lengths
    (shape (...,)) add masks. The softmax runs in float32 at least (JAX's rounds float64
logits to float32; Ember keeps them, so float64 gradients check); queries beyond
    their sequence length give zeros. With ``return_residual`` also returns the
    logsumexp of the logits, (..., T, N).
    """
    if implementation not in (None, "xla"):
        raise EmberValueError(f"dot_product_attention: implementation={implementation!r} is "
                              "not available in Ember; use None (or 'xla'), which Ember "
                              "compiles and fuses for every backend")
    query, key, value = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
    *lead, length_q, heads, features = query.shape
    if (query.ndim < 3 or key.shape != value.shape or key.shape[-1] != features
            or heads % key.shape[-2] or tuple(key.shape[:-3]) != tuple(lead)):
        raise EmberValueError(f"dot_product_attention needs query (..., T, N, H) and key / "
                              f"value (..., S, K, H) with equal leading axes and H, and K "
                              f"dividing N; got query {query.shape}, key {key.shape}, value "
                              f"{value.shape}")
    lead = tuple(lead)
    length_kv, kv_heads = key.shape[-3], key.shape[-2]
    groups = heads // kv_heads
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    scale = 1.0 / math.sqrt(features) if scale is None else scale

    logits_dtype = jnp.promote_types(query.dtype, jnp.float32)
    grouped = query.reshape(*lead, length_q, kv_heads, groups, features)
    logits = jnp.einsum("...tkgh,...skh->...kgts", grouped, key,
                        preferred_element_type=logits_dtype)
    logits = logits.reshape(*lead, heads, length_q, length_kv) * jnp.asarray(scale, logits_dtype)
    if bias is not None:
        logits = (logits + bias).astype(logits_dtype)
    allowed = _attention_mask(lead, heads, length_q, length_kv, mask, is_causal,
                              query_seq_lengths, key_value_seq_lengths, local_window_size)
    if allowed is not None:
        logits = jnp.where(allowed, logits, _large_negative(logits_dtype))
    weights = activations.softmax(logits, axis=-1).astype(key.dtype)
    weights = weights.reshape(*lead, kv_heads, groups, length_q, length_kv)
    out = jnp.einsum("...kgts,...skh->...tkgh", weights, value)
    out = out.reshape(*lead, length_q, heads, features)
    if query_seq_lengths is not None:
        valid = jnp.arange(length_q) < jnp.asarray(query_seq_lengths)[..., None]
        out = out * valid[..., None, None].astype(out.dtype)
    if not return_residual:
        return out
    residual = activations.logsumexp(logits, axis=-1).astype(key.dtype)
    return out, lax.stop_gradient(jnp.swapaxes(residual, -1, -2))


@layer
class CausalSelfAttention:
    """Multi-head self-attention where position t sees positions <= t; x is (..., T, F)."""

    qkv: Linear
    proj: Linear
    num_heads: int = static(1)

    @classmethod
    def init(cls, key: Any, features: int, num_heads: int,
             dtype: Any = jnp.float32) -> "CausalSelfAttention":
        if features % num_heads:
            raise EmberValueError(f"features ({features}) must be divisible by num_heads "
                                  f"({num_heads})")
        k1, k2 = random.split(key)
        return cls(Linear.init(k1, features, 3 * features, dtype=dtype),
                   Linear.init(k2, features, features, dtype=dtype), num_heads)

    def __call__(self, x: Any) -> Any:
        *lead, length, features = x.shape
        qkv = self.qkv(x).reshape(*lead, length, 3, self.num_heads, features // self.num_heads)
        q, k, v = (qkv[..., i, :, :] for i in range(3))
        out = dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.reshape(*lead, length, features))


@layer
class Conv2d:
    """2-D convolution of NCHW inputs with an OIHW kernel (PyTorch's layout)."""

    weight: Any
    bias: Any  # (out_channels,) or None
    stride: tuple[int, int] = static((1, 1))
    padding: Any = static("SAME")  # "SAME", "VALID" or ((top, bottom), (left, right))

    @classmethod
    def init(cls, key: Any, in_channels: int, out_channels: int,
             kernel_size: int | Sequence[int], stride: int | Sequence[int] = 1,
             padding: Any = "SAME", use_bias: bool = True, dtype: Any = jnp.float32) -> "Conv2d":
        init = initializers.he_normal(in_axis=1, out_axis=0)
        weight = init(key, (out_channels, in_channels, *_pair(kernel_size)), dtype)
        bias = jnp.zeros((out_channels,), dtype) if use_bias else None
        if not isinstance(padding, str):
            padding = tuple(tuple(p) for p in padding)
        return cls(weight, bias, _pair(stride), padding)

    def __call__(self, x: Any) -> Any:
        y = lax.conv_general_dilated(x, self.weight, self.stride, self.padding,
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y if self.bias is None else y + self.bias[:, None, None]


def _pool(x: Any, window: Sequence[int], strides: Sequence[int], init: float,
          computation: Callable) -> Any:
    """``lax.reduce_window`` over 'VALID' windows of the last two axes."""
    x = jnp.asarray(x)
    (kh, kw), (sh, sw) = _pair(window), _pair(strides)
    height, width = x.shape[-2:]
    if kh > height or kw > width:
        raise EmberValueError(f"pooling window {(kh, kw)} is larger than the input's last two "
                              f"axes {(height, width)} (input shape {x.shape})")
    lead = (1,) * (x.ndim - 2)
    return lax.reduce_window(x, init, computation, lead + (kh, kw), lead + (sh, sw), "VALID")


def max_pool(x: Any, window: int | Sequence[int] = 2,
             strides: int | Sequence[int] | None = None) -> Any:
    """Maximum over windows of the last two axes (stride defaults to the window)."""
    return _pool(x, window, window if strides is None else strides, -jnp.inf, lax.max)


def avg_pool(x: Any, window: int | Sequence[int] = 2,
             strides: int | Sequence[int] | None = None) -> Any:
    """Mean over windows of the last two axes (stride defaults to the window)."""
    kh, kw = _pair(window)
    return _pool(x, window, window if strides is None else strides, 0.0,
                 lax.add) / float(kh * kw)


@layer
class MaxPool2d:
    window: Any = static(2)
    strides: Any = static(None)

    def __call__(self, x: Any) -> Any:
        return max_pool(x, self.window, self.strides)


@layer
class AvgPool2d:
    window: Any = static(2)
    strides: Any = static(None)

    def __call__(self, x: Any) -> Any:
        return avg_pool(x, self.window, self.strides)


@layer
class BatchNorm:
    """Batch normalization over every axis but ``axis`` (the channels).

    In training it normalizes with the batch's mean and (biased) variance and returns the
    layer with updated running statistics, ``running = momentum * running + (1 -
    momentum) * batch``; in evaluation it uses the running statistics.
    """

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
        stats = jnp.promote_types(dtype, jnp.float32)
        return cls(jnp.ones((features,), dtype), jnp.zeros((features,), dtype),
                   jnp.zeros((features,), stats), jnp.ones((features,), stats),
                   momentum, eps, axis)

    def __call__(self, x: Any, train: bool = True) -> tuple[Any, "BatchNorm"]:
        axis = self.axis % x.ndim
        reduce_axes = tuple(a for a in range(x.ndim) if a != axis)
        shape = tuple(x.shape[axis] if a == axis else 1 for a in range(x.ndim))
        wide = _at_least_float32(x)
        if train:
            mean, var = jnp.mean(wide, axis=reduce_axes), jnp.var(wide, axis=reduce_axes)
            m = self.momentum
            updated = dataclasses.replace(
                self,
                running_mean=m * self.running_mean + (1 - m) * ember.stop_gradient(mean),
                running_var=m * self.running_var + (1 - m) * ember.stop_gradient(var))
        else:
            mean, var, updated = self.running_mean, self.running_var, self
        y = (wide - mean.reshape(shape)) * lax.rsqrt(var.reshape(shape) + self.eps)
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
    """Layers applied in order (stateless ones: BatchNorm's state needs explicit code)."""

    layers: tuple

    def __call__(self, x: Any) -> Any:
        for item in self.layers:
            x = item(x)
        return x
