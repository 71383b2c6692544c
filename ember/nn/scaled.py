"""Block-scaled matrix products, as ``jax.nn.scaled_matmul``, ``scaled_dot_general`` and
``get_scaled_dot_general_config``.

In JAX these run only on cuDNN. Ember gives ``scaled_matmul`` its defining arithmetic
(each block of ``block_size`` contracted entries multiplied by its scale, then an
ordinary product, accumulated in float32), so programs using it run everywhere, and
``scaled_dot_general`` without ``configs`` as ``dot_general``, as JAX does. Quantizing
inside ``scaled_dot_general`` (``configs`` given) is not implemented.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import ml_dtypes
import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.errors import EmberValueError

__all__ = ["BlockScaleConfig", "get_scaled_dot_general_config", "scaled_dot_general",
           "scaled_matmul"]


@dataclasses.dataclass
class BlockScaleConfig:
    """How one operand is quantized: element and scale dtypes, block length."""

    mode: str
    block_size: int
    data_type: Any
    scale_type: Any
    global_scale: Any
    infer_only: bool


def get_scaled_dot_general_config(mode: str, global_scale: Any = None) -> BlockScaleConfig:
    """The 'nvfp4' (blocks of 16 float4 values, float8 scales) or 'mxfp8' (blocks of 32
    float8 values, power-of-two scales) configuration."""
    if mode == "nvfp4":
        scale = jnp.ones((1,), jnp.float32) if global_scale is None else global_scale
        return BlockScaleConfig("nvfp4", 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn,
                                scale, False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, ml_dtypes.float8_e4m3fn,
                                ml_dtypes.float8_e8m0fnu, None, False)
    raise EmberValueError(f"get_scaled_dot_general_config: mode must be 'nvfp4' or 'mxfp8', "
                          f"got {mode!r}")


def scaled_matmul(lhs: Any, rhs: Any, lhs_scales: Any, rhs_scales: Any,
                  preferred_element_type: Any = np.float32) -> Any:
    """``out[b, m, n] = sum_k lhs[b, m, k] * lhs_scales[b, m, k // s] * rhs[b, n, k] *
    rhs_scales[b, n, k // s]`` with ``s = K / K_scales``: lhs (B, M, K), rhs (B, N, K),
    scales (B, M, K_scales) and (B, N, K_scales)."""
    arrays = [jnp.asarray(a) for a in (lhs, rhs, lhs_scales, rhs_scales)]
    if any(a.ndim != 3 for a in arrays):
        raise EmberValueError("scaled_matmul needs 3-d lhs, rhs and scales, got shapes "
                              f"{[a.shape for a in arrays]}")
    lhs, rhs, lhs_scales, rhs_scales = arrays
    if (lhs.shape[0], lhs.shape[2]) != (rhs.shape[0], rhs.shape[2]) or (
            lhs_scales.shape[0], lhs_scales.shape[2]) != (rhs_scales.shape[0],
                                                          rhs_scales.shape[2]):
        raise EmberValueError(f"scaled_matmul: lhs {lhs.shape} and rhs {rhs.shape} (and their "
                              f"scales {lhs_scales.shape}, {rhs_scales.shape}) must agree in "
                              "batch (B) and contracted (K) sizes")
    if lhs_scales.shape[1] != lhs.shape[1] or rhs_scales.shape[1] != rhs.shape[1] or (
            lhs.shape[2] % lhs_scales.shape[2]):
        raise EmberValueError(f"scaled_matmul: scales {lhs_scales.shape}, {rhs_scales.shape} "
                              f"must match the M / N sizes of {lhs.shape}, {rhs.shape} and "
                              "divide K into equal blocks")
    block = lhs.shape[2] // lhs_scales.shape[2]

    def dequantized(x: Any, scales: Any) -> Any:
        return x.astype(jnp.float32) * jnp.repeat(scales.astype(jnp.float32), block, axis=2)

    out = jnp.einsum("bmk,bnk->bmn", dequantized(lhs, lhs_scales),
                     dequantized(rhs, rhs_scales))
    return out.astype(preferred_element_type)


def scaled_dot_general(lhs: Any, rhs: Any, dimension_numbers: Any,
                       preferred_element_type: Any = np.float32,
                       configs: Sequence[BlockScaleConfig] | None = None,
                       implementation: str | None = None) -> Any:
    """``lax.dot_general`` when ``configs`` is None (as in JAX)."""
    if configs is not None:
        raise EmberValueError("scaled_dot_general with configs (quantizing the operands to "
                              "fp8/fp4 blocks) is a cuDNN-only path in JAX and is not in "
                              "Ember; quantize explicitly and call scaled_matmul, or pass "
                              "configs=None for an ordinary dot_general")
    return lax.dot_general(lhs, rhs, dimension_numbers,
                           preferred_element_type=preferred_element_type)
