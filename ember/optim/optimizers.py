"""SGD (with momentum / Nesterov), Adam and AdamW."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import ember.numpy as jnp
from ember.core.pytree import tree_map
from ember.errors import EmberValueError
from ember.optim.base import GradientTransformation, as_schedule

Schedule = float | Callable[[Any], Any]


class SgdState(NamedTuple):
    step: Any
    momentum: Any  # None without momentum


def sgd(learning_rate: Schedule, momentum: float = 0.0,
        nesterov: bool = False) -> GradientTransformation:
    """SGD; with ``momentum`` the heavy-ball velocity ``v = momentum * v + g`` (as optax),
    and with ``nesterov`` the look-ahead direction ``g + momentum * v``."""
    rate = as_schedule(learning_rate)

    def init(params: Any) -> SgdState:
        velocity = tree_map(jnp.zeros_like, params) if momentum else None
        return SgdState(jnp.zeros((), jnp.int32), velocity)

    def update(grads: Any, state: SgdState, params: Any = None):
        lr = rate(state.step)
        if not momentum:
            return tree_map(lambda g: -lr * g, grads), SgdState(state.step + 1, None)
        velocity = tree_map(lambda v, g: momentum * v + g, state.momentum, grads)
        if nesterov:
            direction = tree_map(lambda v, g: g + momentum * v, velocity, grads)
        else:
            direction = velocity
        return tree_map(lambda d: -lr * d, direction), SgdState(state.step + 1, velocity)

    return GradientTransformation(init, update)


class AdamState(NamedTuple):
    step: Any
    mu: Any
    nu: Any


def adam(learning_rate: Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         weight_decay: float = 0.0) -> GradientTransformation:
    """Adam; with ``weight_decay`` it is AdamW (decoupled decay, as Loshchilov & Hutter)."""
    rate = as_schedule(learning_rate)

    def init(params: Any) -> AdamState:
        zeros = lambda p: jnp.zeros(p.shape, jnp.float32)  # moments in float32 (mixed precision)
        return AdamState(jnp.zeros((), jnp.int32), tree_map(zeros, params), tree_map(zeros, params))

    def update(grads: Any, state: AdamState, params: Any = None):
        if weight_decay and params is None:
            raise EmberValueError("adamw needs the params: call update(grads, state, params)")
        step = state.step + 1
        mu = tree_map(lambda m, g: b1 * m + (1 - b1) * g.astype(jnp.float32), state.mu, grads)
        nu = tree_map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g.astype(jnp.float32)),
                      state.nu, grads)
        t = step.astype(jnp.float32)
        correction1 = 1 - b1 ** t
        correction2 = 1 - b2 ** t
        lr = rate(state.step)

        def direction(m, v, p):
            d = (m / correction1) / (jnp.sqrt(v / correction2) + eps)
            if weight_decay:
                d = d + weight_decay * p.astype(jnp.float32)
            return (-lr * d).astype(p.dtype)

        like = grads if params is None else params  # updates take the parameters' dtypes
        return tree_map(direction, mu, nu, like), AdamState(step, mu, nu)

    return GradientTransformation(init, update)


def adamw(learning_rate: Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-4) -> GradientTransformation:
    return adam(learning_rate, b1, b2, eps, weight_decay)
