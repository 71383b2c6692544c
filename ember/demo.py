"""``ember demo``: train a small character-level GPT on text already on this machine.

The corpus is the Python standard library's own source code (no download). The whole
train step (forward, backward, AdamW update) is one ``ember.jit``-compiled program.
The demo reports loss and tokens/s, compares the compiled step with the same step run
eagerly, writes a loss-curve PNG and prints a sample from the trained model.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sysconfig
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember import nn, optim, random
from ember.nn.layers import layer


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    vocab: int = 256  # bytes
    length: int = 64
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    batch: int = 16


@layer
class Block:
    ln1: nn.LayerNorm
    attn: nn.CausalSelfAttention
    ln2: nn.LayerNorm
    mlp: nn.MLP

    @classmethod
    def init(cls, key: Any, cfg: GPTConfig) -> "Block":
        k1, k2 = random.split(key)
        return cls(nn.LayerNorm.init(cfg.d_model),
                   nn.CausalSelfAttention.init(k1, cfg.d_model, cfg.heads),
                   nn.LayerNorm.init(cfg.d_model),
                   nn.MLP.init(k2, cfg.d_model, 4 * cfg.d_model))

    def __call__(self, x: Any) -> Any:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


@layer
class GPT:
    tokens: nn.Embedding
    positions: Any
    blocks: tuple
    ln_f: nn.LayerNorm

    @classmethod
    def init(cls, key: Any, cfg: GPTConfig) -> "GPT":
        keys = random.split(key, cfg.layers + 2)
        return cls(nn.Embedding.init(keys[0], cfg.vocab, cfg.d_model),
                   nn.initializers.normal(0.02)(keys[1], (cfg.length, cfg.d_model)),
                   tuple(Block.init(k, cfg) for k in keys[2:]),
                   nn.LayerNorm.init(cfg.d_model))

    def __call__(self, ids: Any) -> Any:
        x = self.tokens(ids) * 0.1 + self.positions[: ids.shape[-1]]
        for block in self.blocks:
            x = block(x)
        return self.tokens.attend(self.ln_f(x))  # logits over bytes (tied weights)


def loss_fn(model: GPT, inputs: Any, targets: Any) -> Any:
    logits = model(inputs)
    log_probs = nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)
    return -jnp.mean(picked)


def make_train_step(optimizer: optim.GradientTransformation):
    def train_step(model, opt_state, inputs, targets):
        loss, grads = ember.value_and_grad(loss_fn)(model, inputs, targets)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return train_step


def load_corpus(limit_bytes: int = 4_000_000) -> np.ndarray:
    """Bytes of the standard library's .py files, in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in sorted(root.glob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        chunks.append(data)
        total += len(data)
        if total >= limit_bytes:
            break
    if not chunks:
        raise RuntimeError(f"no Python sources found under {root} to train on")
    return np.frombuffer(b"".join(chunks), dtype=np.uint8)


def batches(corpus: np.ndarray, cfg: GPTConfig, seed: int):
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(corpus) - cfg.length - 1, size=cfg.batch)
        window = np.stack([corpus[s: s + cfg.length + 1] for s in starts]).astype(np.int32)
        yield window[:, :-1], window[:, 1:]


def sample(model: GPT, cfg: GPTConfig, prompt: bytes, count: int, seed: int = 0,
           temperature: float = 0.8) -> bytes:
    @ember.jit
    def next_logits(model, window):
        return model(window[None])[0]

    key = random.PRNGKey(seed)
    out = list(prompt)
    for _ in range(count):
        window = np.zeros(cfg.length, np.int32)
        context = out[-cfg.length:]
        window[: len(context)] = context
        logits = np.asarray(next_logits(model, window))[len(context) - 1]
        key, sub = random.split(key)
        probs = np.exp((logits - logits.max()) / temperature)
        probs /= probs.sum()
        choice = int(np.asarray(random.categorical(sub, jnp.log(jnp.asarray(probs)))))
        out.append(choice)
    return bytes(out)


def measure_eager(train_step, model, opt_state, data, cfg: GPTConfig, steps: int = 2) -> float:
    """Tokens/s of the same step without jit (each op dispatched on its own)."""
    inputs, targets = next(data)
    train_step(model, opt_state, inputs, targets)  # warm-up: per-op caches
    start = time.perf_counter()
    for _ in range(steps):
        inputs, targets = next(data)
        model_out, _, loss = train_step(model, opt_state, inputs, targets)
    ember.block_until_ready(loss)
    return steps * cfg.batch * cfg.length / (time.perf_counter() - start)


def plot_losses(losses: Sequence[float], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no loss-curve PNG (pip install matplotlib)")
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot(np.arange(1, len(losses) + 1), losses, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/byte)")
    ax.set_title("ember demo: char-level GPT on the Python stdlib")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _progress(total: int | None):
    try:
        from tqdm import tqdm

        return tqdm(total=total, unit="step", dynamic_ncols=True)
    except ImportError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember demo", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="train steps (default: as many as fit in --seconds)")
    parser.add_argument("--seconds", type=float, default=110.0,
                        help="training time budget when --steps is not given")
    parser.add_argument("--backend", default=None, help="cpu, reference, cuda or opencl")
    parser.add_argument("--out", default="ember-demo-out", help="directory for the PNG")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.backend:
        ember.config.update("backend", args.backend)

    cfg = GPTConfig()
    corpus = load_corpus()
    data = batches(corpus, cfg, args.seed)
    model = GPT.init(random.PRNGKey(args.seed), cfg)
    total = args.steps or 10_000
    optimizer = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(
        optim.warmup_cosine_decay_schedule(0.0, 3e-3, min(50, total // 10 + 1), total, 3e-4),
        weight_decay=0.01))
    opt_state = optimizer.init(model)
    train_step = make_train_step(optimizer)
    compiled_step = ember.jit(train_step, donate_argnums=(0, 1))
    params = sum(leaf.size for leaf in ember.tree_util.tree_leaves(model))
    print(f"ember demo: {cfg.layers}-layer GPT, {params / 1e6:.2f}M parameters, "
          f"{len(corpus) / 1e6:.1f} MB of stdlib source, backend {ember.default_backend().name}")

    start = time.perf_counter()
    inputs, targets = next(data)
    model, opt_state, loss = compiled_step(model, opt_state, inputs, targets)
    losses = [float(loss)]
    print(f"compiled the train step in {time.perf_counter() - start:.2f} s")

    bar = _progress(args.steps)
    train_start = time.perf_counter()
    step = 1
    while step < total:
        if args.steps is None and time.perf_counter() - train_start > args.seconds:
            break
        inputs, targets = next(data)
        model, opt_state, loss = compiled_step(model, opt_state, inputs, targets)
        losses.append(float(loss))
        step += 1
        elapsed = time.perf_counter() - train_start
        rate = (step - 1) * cfg.batch * cfg.length / max(elapsed, 1e-9)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{rate:,.0f}")
        elif step % 20 == 0:
            print(f"step {step:5d}  loss {losses[-1]:.3f}  {rate:,.0f} tokens/s")
    if bar is not None:
        bar.close()
    compiled_rate = (step - 1) * cfg.batch * cfg.length / max(time.perf_counter() - train_start, 1e-9)
    eager_rate = measure_eager(train_step, model, opt_state, data, cfg)

    first = float(np.mean(losses[: max(1, min(10, len(losses)))]))
    last = float(np.mean(losses[-max(1, min(10, len(losses))):]))
    print(f"loss: {first:.3f} -> {last:.3f} over {step} steps "
          f"(uniform guess: {math.log(cfg.vocab):.3f})")
    print(f"throughput: compiled {compiled_rate:,.0f} tokens/s, eager {eager_rate:,.0f} tokens/s "
          f"({compiled_rate / max(eager_rate, 1e-9):.1f}x)")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / "loss.png"
    if plot_losses(losses, png):
        print(f"loss curve: {png}")
    text = sample(model, cfg, b"def ", 160, seed=args.seed)
    print("sample:\n" + text.decode("utf-8", errors="replace"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
