"""The suite's workloads in plain NumPy, with hand-written gradients.

These functions are dtype-generic and play two parts: run on float64 copies of the
inputs they are the oracle every framework's answer is checked against; run on the
float32 inputs themselves they are the NumPy peer's timed implementation. NumPy has no
autodiff, so the backward passes of ``mlp_step`` and ``transformer`` are derived by hand
here (and checked against finite differences in the tests).
"""
from __future__ import annotations

import math

import numpy as np

GELU_C = math.sqrt(2.0 / math.pi)
LAYERNORM_EPS = 1e-5
LEARNING_RATE = 0.01
HEADS = 8
MASKED_SCORE = -1e9


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x * x * x)))


def gelu_derivative(x):
    t = np.tanh(GELU_C * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def layernorm(x, gamma, beta):
    return _layernorm_forward(x, gamma, beta)[0]


def _layernorm_forward(x, gamma, beta):
    centered = x - x.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + LAYERNORM_EPS)
    normalized = centered * inv_std
    return normalized * gamma + beta, (normalized, inv_std)


def _layernorm_backward(dy, saved, gamma):
    """Gradients w.r.t. (x, gamma, beta) of ``normalized * gamma + beta``."""
    normalized, inv_std = saved
    dnorm = dy * gamma
    dx = inv_std * (dnorm - dnorm.mean(axis=-1, keepdims=True)
                    - normalized * (dnorm * normalized).mean(axis=-1, keepdims=True))
    batch_axes = tuple(range(dy.ndim - 1))
    return dx, (dy * normalized).sum(axis=batch_axes), dy.sum(axis=batch_axes)


def mlp_step(params, x, y):
    """One SGD step of a ReLU MLP under softmax cross-entropy; returns (new params, loss)."""
    z1 = x @ params["w1"] + params["b1"]
    h1 = np.maximum(z1, 0)
    z2 = h1 @ params["w2"] + params["b2"]
    h2 = np.maximum(z2, 0)
    logp = log_softmax(h2 @ params["w3"] + params["b3"])
    n = x.shape[0]
    loss = -(y * logp).sum() / n

    dlogits = (np.exp(logp) * y.sum(axis=-1, keepdims=True) - y) / n
    dz2 = (dlogits @ params["w3"].T) * (z2 > 0)
    dz1 = (dz2 @ params["w2"].T) * (z1 > 0)
    grads = {
        "w1": x.T @ dz1, "b1": dz1.sum(axis=0),
        "w2": h1.T @ dz2, "b2": dz2.sum(axis=0),
        "w3": h2.T @ dlogits, "b3": dlogits.sum(axis=0),
    }
    new_params = {k: params[k] - LEARNING_RATE * grads[k] for k in params}
    return new_params, np.asarray(loss, dtype=x.dtype)


def _split_heads(t, heads):
    b, s, d = t.shape
    return t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)


def _merge_heads(t):
    b, h, s, dh = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, h * dh)


def _matmul_grads(inputs, doutput):
    """Weight and bias gradients of ``inputs @ w + b`` over all leading axes."""
    flat_in = inputs.reshape(-1, inputs.shape[-1])
    flat_out = doutput.reshape(-1, doutput.shape[-1])
    return flat_in.T @ flat_out, flat_out.sum(axis=0)


def transformer_grads(params, x):
    """Gradients of mean(block(x)**2) w.r.t. every parameter of a pre-LN transformer block.

    The block: causal multi-head self-attention and a tanh-GELU MLP, each behind a
    layernorm and added to the residual stream.
    """
    p = params
    b, s, d = x.shape
    scale = 1.0 / math.sqrt(d // HEADS)
    causal = np.tril(np.ones((s, s), dtype=bool))

    h1, ln1 = _layernorm_forward(x, p["ln1_g"], p["ln1_b"])
    qkv = h1 @ p["w_qkv"] + p["b_qkv"]
    q, k, v = (_split_heads(qkv[..., i * d:(i + 1) * d], HEADS) for i in range(3))
    probs = softmax(np.where(causal, (q @ k.transpose(0, 1, 3, 2)) * scale, MASKED_SCORE))
    context = _merge_heads(probs @ v)
    x2 = x + context @ p["w_o"] + p["b_o"]
    h2, ln2 = _layernorm_forward(x2, p["ln2_g"], p["ln2_b"])
    z = h2 @ p["w_1"] + p["b_1"]
    a = gelu(z)
    out = x2 + a @ p["w_2"] + p["b_2"]

    g = {}
    dout = 2.0 * out / out.size
    g["w_2"], g["b_2"] = _matmul_grads(a, dout)
    dz = (dout @ p["w_2"].T) * gelu_derivative(z)
    g["w_1"], g["b_1"] = _matmul_grads(h2, dz)
    dx2_norm, g["ln2_g"], g["ln2_b"] = _layernorm_backward(dz @ p["w_1"].T, ln2, p["ln2_g"])
    dx2 = dout + dx2_norm
    g["w_o"], g["b_o"] = _matmul_grads(context, dx2)
    dcontext = _split_heads(dx2 @ p["w_o"].T, HEADS)
    dprobs = dcontext @ v.transpose(0, 1, 3, 2)
    dv = probs.transpose(0, 1, 3, 2) @ dcontext
    dscores = probs * (dprobs - (dprobs * probs).sum(axis=-1, keepdims=True))
    dscores = np.where(causal, dscores, 0) * scale
    dq = dscores @ k
    dk = dscores.transpose(0, 1, 3, 2) @ q
    dqkv = np.concatenate([_merge_heads(t) for t in (dq, dk, dv)], axis=-1)
    g["w_qkv"], g["b_qkv"] = _matmul_grads(h1, dqkv)
    _, g["ln1_g"], g["ln1_b"] = _layernorm_backward(dqkv @ p["w_qkv"].T, ln1, p["ln1_g"])
    return {name: g[name].astype(x.dtype, copy=False) for name in params}


def dispatch_fn(x):
    return (x * 2.0 + 1.0) * x - np.exp(x)
