"""``ember demo``: train a small character-level GPT on text already on this machine.

The corpus is the Python standard library's own source code (no download). The whole
train step (forward, backward, AdamW update) is one ``ember.jit``-compiled program.
The demo reports loss and tokens/s, compares the compiled step with the same step run
eagerly (op by op), writes a loss-curve PNG and prints a sample from the trained model.
With ``--devices N`` the step is data-parallel: a ``shard_map`` over N devices (the host
CPU split in N), each taking 1/N of the batch, with ``pmean`` in the loss. With
``--processes P`` the same step runs across P processes of one device each, started by
``ember launch``: each process feeds its rows of the batch, and the ``pmean`` goes
across processes through MPI.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember import P, lax, nn, optim, random
from ember.errors import EmberValueError
from ember.nn.layers import layer
from ember.sharding import Mesh

Batch = tuple[np.ndarray, np.ndarray]


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    vocab: int = 256  # bytes
    length: int = 64
    width: int = 128
    heads: int = 4
    layers: int = 2
    batch: int = 16

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.length


@layer
class Block:
    """Pre-norm transformer block: attention then MLP, each added to the residual."""

    ln1: nn.LayerNorm
    attn: nn.CausalSelfAttention
    ln2: nn.LayerNorm
    mlp: nn.MLP

    @classmethod
    def init(cls, key: Any, cfg: GPTConfig) -> "Block":
        k1, k2 = random.split(key)
        return cls(nn.LayerNorm.init(cfg.width),
                   nn.CausalSelfAttention.init(k1, cfg.width, cfg.heads),
                   nn.LayerNorm.init(cfg.width),
                   nn.MLP.init(k2, cfg.width, 4 * cfg.width))

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
        small = nn.initializers.normal(0.02)  # GPT-2's embedding scale
        return cls(nn.Embedding.init(keys[0], cfg.vocab, cfg.width, embedding_init=small),
                   small(keys[1], (cfg.length, cfg.width)),
                   tuple(Block.init(k, cfg) for k in keys[2:]),
                   nn.LayerNorm.init(cfg.width))

    def __call__(self, ids: Any) -> Any:
        x = self.tokens(ids) + self.positions[: ids.shape[-1]]
        for block in self.blocks:
            x = block(x)
        return self.tokens.attend(self.ln_f(x))  # logits over bytes (tied weights)


def loss_fn(model: GPT, inputs: Any, targets: Any) -> Any:
    """Mean cross-entropy of the next byte, in nats."""
    log_probs = nn.log_softmax(model(inputs), axis=-1)
    return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def make_optimizer(total_steps: int) -> optim.GradientTransformation:
    """AdamW on gradients clipped to norm 1; a short warmup, then cosine decay."""
    warmup = min(10, total_steps // 10 + 1)
    schedule = optim.warmup_cosine_decay_schedule(3e-4, 3e-3, warmup, total_steps, 3e-4)
    return optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(schedule, weight_decay=0.01))


def make_train_step(optimizer: optim.GradientTransformation) -> Callable:
    def train_step(model, opt_state, inputs, targets):
        loss, grads = ember.value_and_grad(loss_fn)(model, inputs, targets)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return train_step


def make_data_parallel_step(optimizer: optim.GradientTransformation,
                            mesh: Mesh) -> Callable:
    """The train step over ``mesh``'s one axis, ``'data'``: each device takes its slice of
    the batch; the model and optimizer state stay replicated. The gradient of the
    ``pmean``-ed loss with respect to replicated parameters already includes the psum
    over devices (as JAX with ``check_vma``), so no extra ``pmean`` on the gradients."""
    def local_step(model, opt_state, inputs, targets):
        def global_loss(model):
            return lax.pmean(loss_fn(model, inputs, targets), "data")

        loss, grads = ember.value_and_grad(global_loss)(model)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return ember.shard_map(local_step, mesh=mesh, in_specs=(P(), P(), P("data"), P("data")),
                           out_specs=(P(), P(), P()))


def data_mesh(count: int, batch: int) -> Mesh:
    """A ``'data'`` mesh over the first ``count`` devices of the default backend."""
    if batch % count:
        raise EmberValueError(
            f"--batch {batch} does not split over --devices {count}; pick a batch that is "
            f"a multiple of {count}")
    backend = ember.default_backend()
    found = ember.devices(backend)
    if len(found) < count:
        raise EmberValueError(
            f"--devices {count}: the {backend} backend has only {len(found)} devices; the "
            "host backends have ember.config.num_cpu_devices of them")
    return ember.make_mesh((count,), ("data",), devices=found[:count])


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


def batches(corpus: np.ndarray, cfg: GPTConfig, seed: int) -> Iterator[Batch]:
    """Random windows of ``length + 1`` bytes: inputs and the next-byte targets."""
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(corpus) - cfg.length - 1, size=cfg.batch)
        window = np.stack([corpus[s: s + cfg.length + 1] for s in starts]).astype(np.int32)
        yield window[:, :-1], window[:, 1:]


def sample(model: GPT, cfg: GPTConfig, prompt: bytes, count: int, seed: int = 0,
           temperature: float = 0.8) -> bytes:
    """Extend ``prompt`` by ``count`` bytes drawn from the model (compiled forward pass)."""
    next_logits = ember.jit(lambda model, window: model(window[None])[0])
    rng = np.random.default_rng(seed)
    out = list(prompt)
    for _ in range(count):
        context = out[-cfg.length:]
        window = np.zeros(cfg.length, np.int32)
        window[: len(context)] = context
        logits = np.asarray(next_logits(model, window), np.float64)[len(context) - 1]
        probs = np.exp((logits - logits.max()) / temperature)
        out.append(int(rng.choice(cfg.vocab, p=probs / probs.sum())))
    return bytes(out)


def tokens_per_second(step: Callable, state: tuple, data: Iterator[Batch], cfg: GPTConfig,
                      steps: int) -> float:
    """Throughput of ``step`` (after one warm-up call) without keeping its results."""
    step(*state, *next(data))
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(*state, *next(data))[-1]
    ember.block_until_ready(loss)
    return steps * cfg.tokens_per_step / (time.perf_counter() - start)


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


class Progress:
    """A tqdm bar when tqdm is installed and the output is a terminal, and a printed line
    every ``every`` steps."""

    def __init__(self, total: int | None, every: int) -> None:
        try:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="step", dynamic_ncols=True, leave=False,
                             disable=None)  # (None: no bar where not a terminal)
        except ImportError:
            self._bar = None
        self._every = every

    def update(self, step: int, loss: float, rate: float) -> None:
        line = f"step {step:5d}  loss {loss:.3f}  {rate:,.0f} tokens/s"
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{rate:,.0f}")
        if step % self._every == 0:
            (self._bar.write if self._bar is not None else print)(line)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def train(compiled_step: Callable, state: tuple, data: Iterator[Batch], cfg: GPTConfig,
          steps: int | None, seconds: float,
          agree: Callable[[bool], bool] = bool) -> tuple[tuple, list[float], float]:
    """Run the compiled step for ``steps`` steps (or ``seconds``); returns the final
    (model, opt_state), the losses and the compiled throughput in tokens/s. ``agree``
    turns this process's "time is up" into the decision of all the processes."""
    start = time.perf_counter()
    *state, loss = compiled_step(*state, *next(data))
    losses = [float(loss)]
    print(f"compiled the train step in {time.perf_counter() - start:.2f} s")
    progress = Progress(steps, every=max(1, steps // 10) if steps else 25)
    train_start = time.perf_counter()
    while steps is None or len(losses) < steps:
        elapsed = time.perf_counter() - train_start
        if steps is None and agree(elapsed > seconds):
            break
        *state, loss = compiled_step(*state, *next(data))
        losses.append(float(loss))
        rate = (len(losses) - 1) * cfg.tokens_per_step / (time.perf_counter() - train_start)
        progress.update(len(losses), losses[-1], rate)
    progress.close()
    rate = (len(losses) - 1) * cfg.tokens_per_step / max(time.perf_counter() - train_start, 1e-9)
    return tuple(state), losses, rate


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ember demo", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="train steps (default: as many as fit in --seconds)")
    parser.add_argument("--seconds", type=float, default=100.0,
                        help="training time budget when --steps is not given")
    parser.add_argument("--backend", default=None, help="cpu, reference, cuda or opencl")
    parser.add_argument("--out", default="ember-demo-out", help="directory for the PNG")
    parser.add_argument("--layers", type=int, default=GPTConfig.layers)
    parser.add_argument("--width", type=int, default=GPTConfig.width)
    parser.add_argument("--batch", type=int, default=GPTConfig.batch)
    parser.add_argument("--sample", type=int, default=100, help="bytes to generate at the end")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--devices", type=int, default=None,
                        help="train data-parallel over N devices (the host CPU split in N)")
    parser.add_argument("--processes", type=int, default=None,
                        help="train data-parallel across P processes (ember launch), one "
                             "device each")
    parser.add_argument("--launched", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 2:
        parser.error("--steps must be at least 2 (the first step compiles)")
    if args.devices is not None and args.devices < 1:
        parser.error("--devices must be at least 1")
    if args.processes is not None and (args.processes < 1 or args.devices is not None):
        parser.error("--processes takes a count of at least 1, and no --devices (each "
                     "process has one device)")
    return args


def launch_processes(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run this demo in ``args.processes`` processes through ``ember launch``."""
    from ember.distributed import launcher

    return launcher.main(["-n", str(args.processes), "--devices-per-process", "1", __file__,
                          *argv, "--launched"])


def join_processes(cfg: GPTConfig, data: Iterator[Batch]) -> tuple[Mesh, Iterator[Batch],
                                                                  Callable[[bool], bool]]:
    """In a process of ``--processes``: the mesh over every process's device, this
    process's rows of each batch, and how the processes agree to stop. Only process 0
    prints."""
    import ember.distributed
    from ember.experimental import multihost_utils

    ember.distributed.initialize()
    count, rank = ember.process_count(), ember.process_index()
    mesh = data_mesh(count, cfg.batch)
    rows = slice(rank * cfg.batch // count, (rank + 1) * cfg.batch // count)
    if rank != 0:
        sys.stdout = open(os.devnull, "w")

    def agree(time_is_up: bool) -> bool:  # process 0's clock decides for all
        return bool(multihost_utils.broadcast_one_to_all(np.array(time_is_up)))

    return mesh, ((inputs[rows], targets[rows]) for inputs, targets in data), agree


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.processes is not None and not args.launched:
        return launch_processes(args, sys.argv[1:] if argv is None else list(argv))
    if args.backend:
        ember.config.update("backend", args.backend)
    if args.devices and ember.default_backend() in ("cpu", "reference"):
        ember.config.update("num_cpu_devices", args.devices)  # the host CPU split in N
    cfg = GPTConfig(width=args.width, layers=args.layers, batch=args.batch)
    corpus = load_corpus()
    data = batches(corpus, cfg, args.seed)
    model = GPT.init(random.PRNGKey(args.seed), cfg)
    optimizer = make_optimizer(args.steps or 2000)  # 2000: a schedule for --seconds
    agree: Callable[[bool], bool] = bool
    if args.launched:
        mesh, data, agree = join_processes(cfg, data)
        train_step = make_data_parallel_step(optimizer, mesh)
        where = f", data-parallel across {args.processes} processes"
    elif args.devices is None:
        train_step, where = make_train_step(optimizer), ""
    else:
        train_step = make_data_parallel_step(optimizer, data_mesh(args.devices, cfg.batch))
        where = f", data-parallel over {args.devices} devices"
    params = sum(leaf.size for leaf in ember.tree_util.tree_leaves(model))
    print(f"ember demo: {cfg.layers}-layer GPT, {params / 1e6:.2f}M parameters, "
          f"{len(corpus) / 1e6:.1f} MB of stdlib source, backend "
          f"{ember.default_backend()}{where}")

    state = (model, optimizer.init(model))
    compiled_step = ember.jit(train_step, donate_argnums=(0, 1))
    state, losses, compiled_rate = train(compiled_step, state, data, cfg, args.steps,
                                         args.seconds, agree)
    eager_rate = tokens_per_second(train_step, state, data, cfg, steps=2)

    window = max(1, min(10, len(losses) // 4))
    first, last = np.mean(losses[:window]), np.mean(losses[-window:])
    print(f"loss: {first:.3f} -> {last:.3f} over {len(losses)} steps "
          f"(mean of the first and last {window}; a uniform guess scores "
          f"{math.log(cfg.vocab):.3f})")
    print(f"throughput: compiled {compiled_rate:,.0f} tokens/s, eager {eager_rate:,.0f} tokens/s "
          f"({compiled_rate / eager_rate:.1f}x)")
    if args.launched and ember.process_index() != 0:
        return 0  # (process 0 writes the plot and the sample)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if plot_losses(losses, out_dir / "loss.png"):
        print(f"loss curve: {out_dir / 'loss.png'}")
    text = sample(state[0], cfg, b"def ", args.sample, seed=args.seed)
    print("sample:\n" + text.decode("utf-8", errors="replace"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
