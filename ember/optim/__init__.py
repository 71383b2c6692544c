"""``ember.optim``: optimizers as pure functions over pytrees (in the style of optax).

An optimizer is a ``GradientTransformation``: ``state = opt.init(params)`` and
``updates, state = opt.update(grads, state, params)``; ``apply_updates(params, updates)``
adds the updates. Everything is jit-able as part of a train step.
"""
from ember.optim.base import GradientTransformation, apply_updates, chain
from ember.optim.clipping import clip_by_global_norm, global_norm
from ember.optim.optimizers import adam, adamw, sgd
from ember.optim.schedules import (
    constant_schedule,
    cosine_decay_schedule,
    exponential_decay,
    piecewise_constant_schedule,
    step_schedule,
    warmup_cosine_decay_schedule,
)

__all__ = [
    "GradientTransformation", "adam", "adamw", "apply_updates", "chain",
    "clip_by_global_norm", "constant_schedule", "cosine_decay_schedule",
    "exponential_decay", "global_norm", "piecewise_constant_schedule", "sgd",
    "step_schedule", "warmup_cosine_decay_schedule",
]
