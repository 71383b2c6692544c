"""Learning-rate schedules: functions from the step count to a rate (jit-able)."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import ember.numpy as jnp


def constant_schedule(value: float) -> Callable[[Any], Any]:
    return lambda step: jnp.asarray(value, jnp.float32)


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0):
    """Cosine from ``init_value`` to ``alpha * init_value`` over ``decay_steps``."""

    def schedule(step):
        fraction = jnp.minimum(jnp.asarray(step, jnp.float32) / max(decay_steps, 1), 1.0)
        cosine = 0.5 * (1 + jnp.cos(math.pi * fraction))
        return init_value * ((1 - alpha) * cosine + alpha)

    return schedule


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int,
                                 decay_steps: int, end_value: float = 0.0):
    """Linear warmup to ``peak_value``, then cosine decay to ``end_value`` at ``decay_steps``."""

    def schedule(step):
        step = jnp.asarray(step, jnp.float32)
        warm = init_value + (peak_value - init_value) * step / max(warmup_steps, 1)
        fraction = jnp.clip((step - warmup_steps) / max(decay_steps - warmup_steps, 1), 0.0, 1.0)
        decayed = end_value + (peak_value - end_value) * 0.5 * (1 + jnp.cos(math.pi * fraction))
        return jnp.where(step < warmup_steps, warm, decayed)

    return schedule


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float,
                      staircase: bool = False):
    def schedule(step):
        exponent = jnp.asarray(step, jnp.float32) / transition_steps
        if staircase:
            exponent = jnp.floor(exponent)
        return init_value * decay_rate ** exponent

    return schedule


def piecewise_constant_schedule(init_value: float, boundaries_and_scales: dict[int, float]):
    """Multiply the rate by ``scale`` once ``step`` reaches each boundary."""
    items: Sequence[tuple[int, float]] = sorted(boundaries_and_scales.items())

    def schedule(step):
        step = jnp.asarray(step, jnp.int32)
        value = jnp.asarray(init_value, jnp.float32)
        for boundary, scale in items:
            value = jnp.where(step >= boundary, value * scale, value)
        return value

    return schedule


def step_schedule(init_value: float, step_size: int, gamma: float = 0.1):
    """The rate times ``gamma`` every ``step_size`` steps (PyTorch's StepLR)."""
    return exponential_decay(init_value, step_size, gamma, staircase=True)
