"""A bfloat16 mixed-precision train step (and float16 with dynamic loss scaling).

The policy keeps parameters and optimizer state in float32 and runs the forward and
backward passes in bfloat16 (``params=float32,compute=bfloat16,output=float32``):
``policy.cast_to_compute(model)`` inside the differentiated function means gradients
come back in float32 for the float32 parameters. float16 has too little range for raw
gradients, so with ``--dtype float16`` the loss is scaled up before differentiation and
the step is skipped (and the scale halved) whenever a gradient overflows.

    python examples/mixed_precision.py [--dtype bfloat16|float16|float32] [--steps 300]
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember import nn, optim, random
from ember.mixed_precision import DynamicLossScale, Policy, all_finite, select_tree


def init(key: Any) -> nn.Sequential:
    k1, k2, k3 = random.split(key, 3)
    return nn.Sequential((nn.Linear.init(k1, 64, 128), nn.Lambda(nn.gelu),
                          nn.Linear.init(k2, 128, 128), nn.Lambda(nn.gelu),
                          nn.Linear.init(k3, 128, 10)))


def make_train_step(policy: Policy, optimizer: optim.GradientTransformation):
    """One jitted step on (model, opt_state, loss_scale, images, labels); loss_scale is
    None unless the compute dtype is float16."""

    def loss_fn(model, images, labels, loss_scale):
        logits = policy.cast_to_compute(model)(images.astype(policy.compute_dtype))
        logits = policy.cast_to_output(logits)
        loss = -jnp.mean(jnp.sum(nn.log_softmax(logits) * nn.one_hot(labels, 10), axis=-1))
        return loss if loss_scale is None else loss_scale.scale_loss(loss), loss

    @ember.jit
    def train_step(model, opt_state, loss_scale, images, labels):
        grads, loss = ember.grad(loss_fn, has_aux=True)(model, images, labels, loss_scale)
        if loss_scale is not None:
            grads = loss_scale.unscale(grads)
        updates, new_opt_state = optimizer.update(grads, opt_state, model)
        new_model = optim.apply_updates(model, updates)
        if loss_scale is None:
            return new_model, new_opt_state, None, loss
        finite = all_finite(grads)
        model, opt_state = select_tree(finite, (new_model, new_opt_state), (model, opt_state))
        return model, opt_state, loss_scale.adjust(finite), loss

    return train_step


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Train in the chosen precision; return the first and last loss and the accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--backend", default=None)
    args = parser.parse_args(argv)
    if args.backend:
        ember.config.update("backend", args.backend)

    from sklearn.datasets import load_digits

    digits = load_digits()
    images, labels = (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int32)
    policy = Policy.from_string(f"params=float32,compute={args.dtype},output=float32")
    optimizer = optim.adam(3e-3)
    model = init(random.PRNGKey(0))
    opt_state = optimizer.init(model)
    loss_scale = DynamicLossScale.create(2.0 ** 15) if args.dtype == "float16" else None
    train_step = make_train_step(policy, optimizer)

    rng = np.random.default_rng(0)
    losses = []
    for step in range(1, args.steps + 1):
        batch = rng.choice(len(images), args.batch, replace=False)
        model, opt_state, loss_scale, loss = train_step(model, opt_state, loss_scale,
                                                        images[batch], labels[batch])
        losses.append(float(loss))
        if step % max(1, args.steps // 5) == 0:
            scale = "" if loss_scale is None else f"  loss scale {float(loss_scale.scale):g}"
            print(f"step {step:4d}  loss {np.mean(losses[-10:]):.4f}{scale}")
    logits = policy.cast_to_compute(model)(images.astype(policy.compute_dtype))
    accuracy = float(np.mean(np.asarray(jnp.argmax(logits, axis=-1)) == labels))
    print(f"{args.dtype} compute, float32 params: train accuracy {accuracy:.3f}")
    return {"first_loss": losses[0], "last_loss": float(np.mean(losses[-10:])),
            "accuracy": accuracy}


if __name__ == "__main__":
    main()
