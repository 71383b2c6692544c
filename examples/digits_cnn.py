"""A small convolutional net on scikit-learn's bundled 8x8 digits (no download).

Conv2d -> BatchNorm -> relu -> max-pool, twice, then a linear classifier; Adam with a
cosine schedule; the whole train step is one ``ember.jit``. BatchNorm keeps running
statistics, so the model returned by the train step carries them and evaluation uses
them (``train=False``).

    python examples/digits_cnn.py [--steps 200] [--backend cpu]
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember import nn, optim, random
from ember.nn.layers import layer


@layer
class ConvBlock:
    conv: nn.Conv2d
    norm: nn.BatchNorm

    @classmethod
    def init(cls, key: Any, in_channels: int, out_channels: int) -> "ConvBlock":
        return cls(nn.Conv2d.init(key, in_channels, out_channels, 3),
                   nn.BatchNorm.init(out_channels))

    def __call__(self, x: Any, train: bool) -> tuple[Any, "ConvBlock"]:
        y, norm = self.norm(self.conv(x), train=train)
        return nn.max_pool(nn.relu(y)), ConvBlock(self.conv, norm)


@layer
class DigitsCNN:
    block1: ConvBlock
    block2: ConvBlock
    head: nn.Linear

    @classmethod
    def init(cls, key: Any) -> "DigitsCNN":
        k1, k2, k3 = random.split(key, 3)
        return cls(ConvBlock.init(k1, 1, 8), ConvBlock.init(k2, 8, 16),
                   nn.Linear.init(k3, 16 * 2 * 2, 10))

    def __call__(self, images: Any, train: bool = False) -> tuple[Any, "DigitsCNN"]:
        """Logits for (batch, 1, 8, 8) images, and the model with updated statistics."""
        x, block1 = self.block1(images, train)
        x, block2 = self.block2(x, train)
        logits = self.head(x.reshape(x.shape[0], -1))
        return logits, DigitsCNN(block1, block2, self.head)


def cross_entropy(logits: Any, labels: Any) -> Any:
    return -jnp.mean(jnp.sum(nn.log_softmax(logits) * nn.one_hot(labels, 10), axis=-1))


def load_data(seed: int = 0) -> tuple[np.ndarray, ...]:
    """The 1797 digits scaled to [0, 1], shuffled and split 1500 / 297."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    order = np.random.default_rng(seed).permutation(len(images))
    images, labels = images[order], digits.target[order].astype(np.int32)
    return images[:1500], labels[:1500], images[1500:], labels[1500:]


def main(argv: Sequence[str] | None = None) -> float:
    """Train and return the test accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--backend", default=None)
    args = parser.parse_args(argv)
    if args.backend:
        ember.config.update("backend", args.backend)

    train_x, train_y, test_x, test_y = load_data()
    model = DigitsCNN.init(random.PRNGKey(0))
    optimizer = optim.adam(optim.cosine_decay_schedule(1e-2, args.steps))
    opt_state = optimizer.init(model)

    @ember.jit
    def train_step(model, opt_state, images, labels):
        def loss_fn(model):
            logits, updated = model(images, train=True)
            return cross_entropy(logits, labels), updated

        (loss, updated), grads = ember.value_and_grad(loss_fn, has_aux=True)(model)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(updated, updates), opt_state, loss

    predict = ember.jit(lambda model, images: jnp.argmax(model(images)[0], axis=-1))

    rng = np.random.default_rng(1)
    for step in range(1, args.steps + 1):
        batch = rng.choice(len(train_x), args.batch, replace=False)
        model, opt_state, loss = train_step(model, opt_state, train_x[batch], train_y[batch])
        if step % max(1, args.steps // 5) == 0:
            print(f"step {step:4d}  loss {float(loss):.4f}")
    accuracy = float(np.mean(np.asarray(predict(model, test_x)) == test_y))
    print(f"test accuracy: {accuracy:.3f} on {len(test_y)} held-out digits")
    return accuracy


if __name__ == "__main__":
    main()
