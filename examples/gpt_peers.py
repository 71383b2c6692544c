"""The ``ember demo`` GPT's train step in Ember, JAX (``jax.jit``) and PyTorch
(``torch.compile``): step time and tokens/s on this machine.

Every framework starts from the same parameters (Ember's initialization, by checkpoint
name) and trains on the same batches with the same AdamW (lr 1e-3, weight decay 0.01,
gradients clipped to norm 1), so their losses agree step by step: the comparison is of
one computation. JAX and PyTorch are optional; missing ones are reported and skipped.

    python examples/gpt_peers.py [--steps 20] [--peers ember,jax,torch,torch-eager] [--backend]
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any, Callable, Sequence

import numpy as np

import ember
from ember import demo, optim, random
from ember.core.pytree import tree_flatten
from ember.serialization import leaf_paths

LR, WEIGHT_DECAY, CLIP, EPS, B1, B2 = 1e-3, 0.01, 1.0, 1e-8, 0.9, 0.999

Step = Callable[[np.ndarray, np.ndarray], float]  # one train step on a batch -> loss


def named_params(model: Any) -> dict[str, np.ndarray]:
    """Copies of the model's parameters by checkpoint name ("blocks.0.attn.qkv.weight");
    copies, because the Ember step donates (updates in place) the buffers of ``model``."""
    leaves, treedef = tree_flatten(model)
    return {name: np.array(leaf) for name, leaf in zip(leaf_paths(treedef), leaves)}


def ember_step(model: Any, cfg: demo.GPTConfig) -> Step:
    optimizer = optim.chain(optim.clip_by_global_norm(CLIP),
                            optim.adamw(LR, B1, B2, EPS, weight_decay=WEIGHT_DECAY))
    compiled = ember.jit(demo.make_train_step(optimizer), donate_argnums=(0, 1))
    state = [model, optimizer.init(model)]

    def step(inputs, targets):
        state[0], state[1], loss = compiled(state[0], state[1], inputs, targets)
        return float(loss)

    return step


def gpt_forward(xp: Any, ops: dict[str, Callable], cfg: demo.GPTConfig) -> Callable:
    """The demo's GPT, written once over an array module ``xp`` (jax.numpy or torch) and
    the few operations whose names differ (``ops``): ``(params, ids) -> log-probs``."""
    heads, width = cfg.heads, cfg.width

    def layer_norm(x, p, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / ops["sqrt"](var + 1e-5) * p[name + ".scale"] + p[name + ".bias"]

    def linear(x, p, name):
        return x @ p[name + ".weight"] + p[name + ".bias"]

    def forward(p, ids):
        batch, length = ids.shape
        x = p["tokens.table"][ids] + p["positions"][:length]
        for i in range(cfg.layers):
            b = f"blocks.{i}."
            qkv = linear(layer_norm(x, p, b + "ln1"), p, b + "attn.qkv")
            qkv = qkv.reshape(batch, length, 3, heads, width // heads)
            attended = ops["attention"](qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2])
            x = x + linear(attended.reshape(batch, length, width), p, b + "attn.proj")
            hidden = ops["gelu"](linear(layer_norm(x, p, b + "ln2"), p, b + "mlp.fc1"))
            x = x + linear(hidden, p, b + "mlp.fc2")
        return ops["log_softmax"](layer_norm(x, p, "ln_f") @ p["tokens.table"].T)

    return forward


def jax_step(params: dict[str, np.ndarray], cfg: demo.GPTConfig) -> Step:
    import jax
    import jax.numpy as jnp

    def attention(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    log_probs = gpt_forward(jnp, {"sqrt": jnp.sqrt, "gelu": jax.nn.gelu,
                                  "attention": attention, "log_softmax": jax.nn.log_softmax}, cfg)

    def loss_fn(p, inputs, targets):
        return -jnp.mean(jnp.take_along_axis(log_probs(p, inputs), targets[..., None], -1))

    @jax.jit
    def train_step(p, m, v, count, inputs, targets):
        loss, grads = jax.value_and_grad(loss_fn)(p, inputs, targets)
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads)))
        grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, CLIP / norm), grads)
        count = count + 1
        m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, v, grads)
        c1, c2 = 1 - B1 ** count, 1 - B2 ** count
        p = jax.tree_util.tree_map(
            lambda p, m, v: p - LR * ((m / c1) / (jnp.sqrt(v / c2) + EPS) + WEIGHT_DECAY * p),
            p, m, v)
        return p, m, v, count, loss

    zeros = {k: jnp.zeros_like(a) for k, a in params.items()}
    state = [{k: jnp.asarray(a) for k, a in params.items()}, zeros, dict(zeros), jnp.float32(0)]

    def step(inputs, targets):
        *state[:], loss = train_step(*state, inputs, targets)
        return float(loss)

    return step


def torch_step(params: dict[str, np.ndarray], cfg: demo.GPTConfig, compile: bool) -> Step:
    import torch
    import torch.nn.functional as F

    def attention(q, k, v):  # (B, T, N, H) in, as JAX; PyTorch wants (B, N, T, H)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                             v.transpose(1, 2), is_causal=True)
        return out.transpose(1, 2)

    log_probs = gpt_forward(torch, {
        "sqrt": torch.sqrt, "gelu": lambda x: F.gelu(x, approximate="tanh"),
        "attention": attention, "log_softmax": lambda x: F.log_softmax(x, dim=-1)}, cfg)

    def loss_fn(p, inputs, targets):
        return -log_probs(p, inputs).gather(-1, targets[..., None]).mean()

    p = {k: torch.tensor(a, requires_grad=True) for k, a in params.items()}
    optimizer = torch.optim.AdamW(p.values(), lr=LR, betas=(B1, B2), eps=EPS,
                                  weight_decay=WEIGHT_DECAY)
    forward = torch.compile(loss_fn) if compile else loss_fn

    def step(inputs, targets):
        optimizer.zero_grad(set_to_none=True)
        loss = forward(p, torch.from_numpy(inputs).long(), torch.from_numpy(targets).long())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(p.values(), CLIP)
        optimizer.step()
        return loss.item()

    return step


def measure(step: Step, batches: list, warmup: int) -> tuple[float, list[float], list[float]]:
    """(seconds of the first call, per-step seconds after warm-up, every loss)."""
    losses, times = [], []
    for inputs, targets in batches:
        start = time.perf_counter()
        losses.append(step(inputs, targets))
        times.append(time.perf_counter() - start)
    return times[0], times[warmup:], losses


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Run each available peer; return {peer: {first_s, step_ms, tokens_per_s, losses}}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps after warm-up")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--layers", type=int, default=demo.GPTConfig.layers)
    parser.add_argument("--width", type=int, default=demo.GPTConfig.width)
    parser.add_argument("--batch", type=int, default=demo.GPTConfig.batch)
    parser.add_argument("--peers", default="ember,jax,torch,torch-eager")
    parser.add_argument("--backend", default=None, help="Ember's backend (default: the best)")
    args = parser.parse_args(argv)
    if args.backend:
        ember.config.update("backend", args.backend)

    cfg = demo.GPTConfig(width=args.width, layers=args.layers, batch=args.batch)
    data = demo.batches(demo.load_corpus(), cfg, seed=0)
    batches = [next(data) for _ in range(args.warmup + args.steps)]
    model = demo.GPT.init(random.PRNGKey(0), cfg)
    params = named_params(model)
    makers = {"ember": lambda: ember_step(model, cfg), "jax": lambda: jax_step(params, cfg),
              "torch": lambda: torch_step(params, cfg, compile=True),
              "torch-eager": lambda: torch_step(params, cfg, compile=False)}
    print(f"GPT: {cfg.layers} layers, width {cfg.width}, batch {cfg.batch}x{cfg.length} bytes; "
          f"{args.steps} timed steps after {args.warmup} warm-up; Ember backend "
          f"{ember.default_backend()}")
    results = {}
    for name in args.peers.split(","):
        try:
            step = makers[name]()
        except ImportError as error:
            print(f"{name:12s} not installed ({error.name})")
            continue
        first, times, losses = measure(step, batches, args.warmup)
        median = statistics.median(times)
        results[name] = {"first_s": first, "step_ms": 1e3 * median,
                         "tokens_per_s": cfg.tokens_per_step / median, "losses": losses}
        print(f"{name:12s} first call {first:6.2f} s   step {1e3 * median:8.1f} ms   "
              f"{cfg.tokens_per_step / median:9,.0f} tokens/s   loss {losses[0]:.4f} -> "
              f"{losses[-1]:.4f} (uniform {math.log(cfg.vocab):.3f})")
    return results


if __name__ == "__main__":
    main()
