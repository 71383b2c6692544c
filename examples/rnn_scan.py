"""A recurrent network as one ``lax.scan``: next-value prediction on noisy sine waves.

An Elman RNN, ``h_t = tanh(W_x x_t + W_h h_{t-1} + b)``, reads each sequence one step at
a time and predicts the next value from ``h_t``. ``lax.scan`` turns the time loop into one
loop primitive in the graph, so the compiled train step (forward, backward through
time, Adam) stays small however long the sequences are; gradients flow back through the
scan's transpose rule.

    python examples/rnn_scan.py [--steps 300] [--length 40]
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax, nn, optim, random
from ember.nn.layers import layer


@layer
class ElmanRNN:
    inp: nn.Linear
    rec: nn.Linear
    out: nn.Linear

    @classmethod
    def init(cls, key: Any, hidden: int) -> "ElmanRNN":
        k1, k2, k3 = random.split(key, 3)
        small = nn.initializers.normal(0.5 / np.sqrt(hidden))  # a stable recurrence
        return cls(nn.Linear.init(k1, 1, hidden),
                   nn.Linear.init(k2, hidden, hidden, use_bias=False, kernel_init=small),
                   nn.Linear.init(k3, hidden, 1))

    def __call__(self, xs: Any) -> Any:
        """(time, batch, 1) inputs -> (time, batch, 1) predictions of the next value."""

        def step(h, x):
            h = jnp.tanh(self.inp(x) + self.rec(h))
            return h, self.out(h)

        h0 = jnp.zeros((xs.shape[1], self.rec.weight.shape[0]), xs.dtype)
        _, predictions = lax.scan(step, h0, xs)
        return predictions


def sine_batch(rng: np.random.Generator, batch: int, length: int) -> tuple[np.ndarray, ...]:
    """Sines of random frequency and phase plus noise, as (time, batch, 1) input/target."""
    t = np.arange(length + 1)[:, None]
    freq = rng.uniform(0.1, 0.4, batch)
    phase = rng.uniform(0, 2 * np.pi, batch)
    waves = np.sin(freq * t + phase) + 0.05 * rng.standard_normal((length + 1, batch))
    waves = waves.astype(np.float32)[..., None]
    return waves[:-1], waves[1:]


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Train; return the first and last losses and the last-value baseline's loss."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--backend", default=None)
    args = parser.parse_args(argv)
    if args.backend:
        ember.config.update("backend", args.backend)

    model = ElmanRNN.init(random.PRNGKey(0), args.hidden)
    optimizer = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-2))
    opt_state = optimizer.init(model)

    def loss_fn(model, xs, ys):
        return jnp.mean(jnp.square(model(xs) - ys))

    @ember.jit
    def train_step(model, opt_state, xs, ys):
        loss, grads = ember.value_and_grad(loss_fn)(model, xs, ys)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    rng = np.random.default_rng(0)
    losses = []
    for step in range(1, args.steps + 1):
        model, opt_state, loss = train_step(model, opt_state, *sine_batch(rng, args.batch,
                                                                          args.length))
        losses.append(float(loss))
        if step % max(1, args.steps // 5) == 0:
            print(f"step {step:4d}  loss {np.mean(losses[-10:]):.4f}")
    xs, ys = sine_batch(np.random.default_rng(1), 256, args.length)
    final = float(ember.jit(loss_fn)(model, xs, ys))
    baseline = float(np.mean(np.square(xs - ys)))  # predict "same as now"
    print(f"held-out loss {final:.4f}; repeating the last value scores {baseline:.4f}")
    return {"first_loss": losses[0], "last_loss": final, "baseline": baseline}


if __name__ == "__main__":
    main()
