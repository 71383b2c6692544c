"""PyTorch versions of the suite, written the way a PyTorch user would write them.

Each takes the ``torch`` module (imported only when PyTorch is a peer in the run) and
returns a function of tensors that computes what the JAX-style workload computes.
Gradients go through ``torch.func``, the closest match to ``jax.grad`` that runs both
eagerly and under ``torch.compile``. Attention uses PyTorch's fused
``scaled_dot_product_attention``, so PyTorch is measured at its best.
"""
from __future__ import annotations

from ember.bench.reference import HEADS, LAYERNORM_EPS, LEARNING_RATE


def gelu(torch):
    def gelu(x):
        return torch.nn.functional.gelu(x, approximate="tanh")
    return gelu


def softmax(torch):
    def softmax(x):
        return torch.softmax(x, dim=-1)
    return softmax


def layernorm(torch):
    def layernorm(x, gamma, beta):
        return torch.nn.functional.layer_norm(x, gamma.shape, gamma, beta, eps=LAYERNORM_EPS)
    return layernorm


def mlp_step(torch):
    F = torch.nn.functional

    def loss_fn(params, x, y):
        h = torch.relu(x @ params["w1"] + params["b1"])
        h = torch.relu(h @ params["w2"] + params["b2"])
        logits = h @ params["w3"] + params["b3"]
        return -(y * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()

    value_and_grad = torch.func.grad_and_value(loss_fn)

    def mlp_step(params, x, y):
        grads, loss = value_and_grad(params, x, y)
        new_params = {k: params[k] - LEARNING_RATE * grads[k] for k in params}
        return new_params, loss

    return mlp_step


def transformer(torch):
    F = torch.nn.functional

    def block(p, x):
        b, s, d = x.shape
        h = F.layer_norm(x, (d,), p["ln1_g"], p["ln1_b"], eps=LAYERNORM_EPS)
        qkv = h @ p["w_qkv"] + p["b_qkv"]
        q, k, v = (t.reshape(b, s, HEADS, d // HEADS).transpose(1, 2) for t in qkv.split(d, dim=-1))
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + context.transpose(1, 2).reshape(b, s, d) @ p["w_o"] + p["b_o"]
        h = F.layer_norm(x, (d,), p["ln2_g"], p["ln2_b"], eps=LAYERNORM_EPS)
        h = F.gelu(h @ p["w_1"] + p["b_1"], approximate="tanh")
        return x + h @ p["w_2"] + p["b_2"]

    def loss(params, x):
        out = block(params, x)
        return (out * out).mean()

    return torch.func.grad(loss)


def dispatch(torch):
    def five_ops(x):
        return (x * 2.0 + 1.0) * x - torch.exp(x)
    return five_ops
