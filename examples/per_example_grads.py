"""Per-example gradients with ``vmap(grad(...))``, used for differentially private SGD.

``ember.grad`` gives the gradient of one example's loss; ``ember.vmap`` maps it over the
batch, so one compiled program returns a gradient per example (a leading batch axis on
every parameter). DP-SGD (Abadi et al., 2016) clips each example's gradient to a norm
bound, sums, adds Gaussian noise and averages. The model is a logistic-regression MLP
on the 8x8 digits.

    python examples/per_example_grads.py [--steps 200] [--noise 0.5]
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember import nn, optim, random

Params = dict[str, Any]


def init(key: Any) -> Params:
    k1, k2 = random.split(key)
    return {"hidden": nn.Linear.init(k1, 64, 32), "out": nn.Linear.init(k2, 32, 10)}


def example_loss(params: Params, image: Any, label: Any) -> Any:
    """Cross-entropy of one flattened image."""
    logits = params["out"](nn.relu(params["hidden"](image)))
    return -nn.log_softmax(logits)[label]


per_example_grads = ember.vmap(ember.grad(example_loss), in_axes=(None, 0, 0))


def clip_each(grads: Params, max_norm: float) -> Params:
    """Scale every example's gradient (a slice along axis 0) to norm <= max_norm."""
    leaves = ember.tree_util.tree_leaves(grads)
    norms = jnp.sqrt(sum(jnp.sum(jnp.square(g.reshape(g.shape[0], -1)), axis=1) for g in leaves))
    factor = jnp.minimum(1.0, max_norm / (norms + 1e-12))
    return ember.tree_util.tree_map(
        lambda g: g * factor.reshape((-1,) + (1,) * (g.ndim - 1)), grads)


def private_gradient(params: Params, images: Any, labels: Any, key: Any, max_norm: float,
                     noise: float) -> Params:
    """Clipped, summed, noised and averaged per-example gradients (one DP-SGD step)."""
    clipped = clip_each(per_example_grads(params, images, labels), max_norm)
    leaves, treedef = ember.tree_util.tree_flatten(clipped)
    keys = random.split(key, len(leaves))
    noisy = [(jnp.sum(g, axis=0) + noise * max_norm * random.normal(k, g.shape[1:]))
             / images.shape[0] for g, k in zip(leaves, keys)]
    return ember.tree_util.tree_unflatten(treedef, noisy)


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    return (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int32)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Train with DP-SGD; return the first and last loss and the train accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max-norm", type=float, default=1.0)
    parser.add_argument("--noise", type=float, default=0.5, help="noise multiplier")
    parser.add_argument("--backend", default=None)
    args = parser.parse_args(argv)
    if args.backend:
        ember.config.update("backend", args.backend)

    images, labels = load_digits()
    params = init(random.PRNGKey(0))
    optimizer = optim.sgd(0.5, momentum=0.9)
    opt_state = optimizer.init(params)
    mean_loss = ember.jit(lambda p, x, y: jnp.mean(ember.vmap(example_loss, (None, 0, 0))(p, x, y)))

    @ember.jit
    def train_step(params, opt_state, x, y, key):
        grads = private_gradient(params, x, y, key, args.max_norm, args.noise)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state

    rng = np.random.default_rng(0)
    key = random.PRNGKey(1)
    first = float(mean_loss(params, images, labels))
    for step in range(1, args.steps + 1):
        batch = rng.choice(len(images), args.batch, replace=False)
        key, sub = random.split(key)
        params, opt_state = train_step(params, opt_state, images[batch], labels[batch], sub)
        if step % max(1, args.steps // 4) == 0:
            print(f"step {step:4d}  loss {float(mean_loss(params, images, labels)):.4f}")
    last = float(mean_loss(params, images, labels))
    logits = params["out"](nn.relu(params["hidden"](images)))
    accuracy = float(np.mean(np.asarray(jnp.argmax(logits, axis=-1)) == labels))
    print(f"DP-SGD (clip {args.max_norm}, noise x{args.noise}): loss {first:.3f} -> {last:.3f}, "
          f"train accuracy {accuracy:.3f}")
    return {"first_loss": first, "last_loss": last, "accuracy": accuracy}


if __name__ == "__main__":
    main()
