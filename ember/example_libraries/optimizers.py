"""Optimizers in the style of ``jax.example_libraries.optimizers``, with its API, update
rules and schedules, so that programs written against it run unchanged.

An optimizer is a triple ``(init_fun, update_fun, get_params)``: ``opt_state =
init_fun(params)``, ``opt_state = update_fun(step, grads, opt_state)`` and ``params =
get_params(opt_state)``. Each is written for one array (see ``optimizer``) and lifted to
pytrees of parameters; ``OptimizerState`` is a pytree, so a whole train step jits.
(``ember.optim`` holds the optax-style transformations; this module keeps JAX's older
contract.)
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import numpy as np

import ember.numpy as jnp
from ember.core.pytree import (
    PyTreeDef, register_pytree_node, tree_flatten, tree_leaves, tree_map, tree_unflatten)
from ember.errors import EmberTypeError, EmberValueError

__all__ = [
    "JoinPoint", "Optimizer", "OptimizerState", "adagrad", "adam", "adamax", "clip_grads",
    "constant", "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule",
    "momentum", "nesterov", "optimizer", "pack_optimizer_state", "piecewise_constant",
    "polynomial_decay", "rmsprop", "rmsprop_momentum", "sgd", "sm3",
    "unpack_optimizer_state",
]

Schedule = Callable[[Any], Any]
Step = int


class OptimizerState(NamedTuple):
    """The state of an optimizer over a pytree of parameters: the flat leaves of each
    parameter's state (``packed_state``), the parameters' tree structure and the tree
    structure of each parameter's state."""

    packed_state: Any
    tree_def: PyTreeDef
    subtree_defs: Any


register_pytree_node(
    OptimizerState,
    lambda state: ((state.packed_state,), (state.tree_def, state.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], *aux))


class Optimizer(NamedTuple):
    init_fn: Callable[[Any], OptimizerState]
    update_fn: Callable[[Step, Any, OptimizerState], OptimizerState]
    params_fn: Callable[[OptimizerState], Any]


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]
              ) -> Callable[..., Optimizer]:
    """Lift an optimizer written for one array (``opt_maker(*args)`` returns ``init(x)``,
    ``update(step, g, state)`` and ``get_params(state)``) to pytrees of parameters."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree: Any) -> OptimizerState:
            x0_flat, tree = tree_flatten(x0_tree)
            states = [tree_flatten(init(x0)) for x0 in x0_flat]
            return OptimizerState([leaves for leaves, _ in states], tree,
                                  [subtree for _, subtree in states])

        @functools.wraps(update)
        def tree_update(i: Step, grad_tree: Any, opt_state: OptimizerState) -> OptimizerState:
            packed, tree, subtrees = opt_state
            grads, grad_tree_def = tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise EmberTypeError(
                    "optimizer update function was passed a gradient tree that did not match "
                    f"the parameter tree structure with which it was initialized: parameter "
                    f"tree {tree} and grad tree {grad_tree_def}")
            new_states = [tree_flatten(update(i, g, tree_unflatten(subtree, leaves)))
                          for g, subtree, leaves in zip(grads, subtrees, packed)]
            new_subtrees = [subtree for _, subtree in new_states]
            if list(new_subtrees) != list(subtrees):
                raise EmberTypeError("optimizer update function produced an output structure "
                                     "that did not match its input structure")
            return OptimizerState([leaves for leaves, _ in new_states], tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state: OptimizerState) -> Any:
            packed, tree, subtrees = opt_state
            return tree_unflatten(tree, [get_params(tree_unflatten(subtree, leaves))
                                         for subtree, leaves in zip(subtrees, packed)])

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


# --- schedules ----------------------------------------------------------------------------

def constant(step_size: float) -> Schedule:
    def schedule(i: Any) -> Any:
        return step_size
    return schedule


def exponential_decay(step_size: float, decay_steps: float, decay_rate: float) -> Schedule:
    """``step_size * decay_rate ** (i / decay_steps)``."""
    def schedule(i: Any) -> Any:
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size: float, decay_steps: float, decay_rate: float,
                       staircase: bool = False) -> Schedule:
    """``step_size / (1 + decay_rate * i / decay_steps)``, the ratio floored with
    ``staircase``."""
    def schedule(i: Any) -> Any:
        ratio = jnp.floor(i / decay_steps) if staircase else i / decay_steps
        return step_size / (1 + decay_rate * ratio)
    return schedule


def polynomial_decay(step_size: float, decay_steps: int, final_step_size: float,
                     power: float = 1.0) -> Schedule:
    """From ``step_size`` to ``final_step_size`` over ``decay_steps`` steps along
    ``(1 - i / decay_steps) ** power``, then constant."""
    def schedule(i: Any) -> Any:
        fraction = jnp.minimum(i, decay_steps) / decay_steps
        return (1 - fraction) ** power * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """``values[k]`` for steps past ``k`` of the ``boundaries`` (one fewer than values)."""
    boundaries, values = np.array(boundaries), np.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise EmberValueError("piecewise_constant: boundaries and values must be sequences")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise EmberValueError(f"piecewise_constant: values ({values.shape[0]}) must have one "
                              f"more element than boundaries ({boundaries.shape[0]})")

    def schedule(i: Any) -> Any:
        return jnp.asarray(values)[jnp.sum(i > jnp.asarray(boundaries))]
    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A schedule as it is, or a constant one from a scalar step size."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if np.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise EmberTypeError(f"step size must be a scalar or a schedule (a function of the "
                         f"step), got {type(scalar_or_schedule).__name__}")


# --- optimizers ---------------------------------------------------------------------------

@optimizer
def sgd(step_size: float | Schedule):
    """Stochastic gradient descent: ``x - step_size(i) * g``."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        return x0

    def update(i: Step, g: Any, x: Any) -> Any:
        return x - step_size(i) * g

    def get_params(x: Any) -> Any:
        return x

    return init, update, get_params


@optimizer
def momentum(step_size: float | Schedule, mass: float):
    """Heavy-ball momentum: ``v = mass * v + g``, ``x - step_size(i) * v``."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def nesterov(step_size: float | Schedule, mass: float):
    """Nesterov momentum: the step looks ahead along the new velocity."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


def _inverse_sqrt_or_zero(total: Any) -> Any:
    """``1 / sqrt(total)`` where total is positive, else 0 (no division by zero)."""
    positive = total > 0
    return jnp.where(positive, 1.0 / jnp.sqrt(jnp.where(positive, total, 1.0)), 0.0)


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9):
    """Adagrad (Duchi et al., 2011), with momentum on the scaled gradient."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        m = (1.0 - momentum) * (g * _inverse_sqrt_or_zero(g_sq)) + momentum * m
        return x - step_size(i) * m, g_sq, m

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8):
    """RMSProp: the gradient divided by a running root mean square of its history."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9):
    """RMSProp with momentum on the scaled step."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


def _bias_correction(beta: float, i: Any, dtype: Any) -> Any:
    """``1 - beta ** (i + 1)`` in the moments' dtype."""
    return 1 - jnp.asarray(beta, dtype) ** (i + 1)


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    """Adam (Kingma and Ba, 2014), with bias-corrected moments."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / _bias_correction(b1, i, m.dtype)
        v_hat = v / _bias_correction(b2, i, m.dtype)
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8):
    """AdaMax, Adam's infinity-norm variant."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        step = step_size(i) / _bias_correction(b1, i, m.dtype)
        return x - step * m / (u + eps), m, u

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9):
    """SM3 (Anil et al., 2019): Adagrad whose accumulator costs one vector per axis. Each
    entry's accumulator is the minimum over its axes' vectors plus its squared gradient;
    each vector then keeps the maximum of the accumulator across its axis."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> tuple:
        shape = np.shape(x0) or (1,)
        return x0, jnp.zeros_like(x0), [jnp.zeros(size, jnp.asarray(x0).dtype)
                                         for size in shape]

    def update(i: Step, g: Any, state: tuple) -> tuple:
        x, m, vs = state
        shape = np.shape(x)
        x, m, g = jnp.atleast_1d(x), jnp.atleast_1d(m), jnp.atleast_1d(g)
        along = [v.reshape([-1 if axis == j else 1 for axis in range(g.ndim)])
                 for j, v in enumerate(vs)]
        accumulated = functools.reduce(jnp.minimum, along) + jnp.square(g)
        m = (1.0 - momentum) * (g * _inverse_sqrt_or_zero(accumulated)) + momentum * m
        x = x - step_size(i) * m
        vs = [accumulated.max(tuple(a for a in range(g.ndim) if a != j))
              for j in range(g.ndim)]
        return x.reshape(shape), m.reshape(shape), vs

    def get_params(state: tuple) -> Any:
        return state[0]

    return init, update, get_params


# --- utilities ----------------------------------------------------------------------------

def l2_norm(tree: Any) -> Any:
    """The l2 norm of all the leaves of ``tree`` together."""
    return jnp.sqrt(sum(jnp.vdot(leaf, leaf) for leaf in tree_leaves(tree)))


def clip_grads(grad_tree: Any, max_norm: float) -> Any:
    """``grad_tree`` scaled down to l2 norm ``max_norm`` if its norm is larger."""
    norm = l2_norm(grad_tree)
    return tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """Marks where a parameter's state subtree begins in an unpacked optimizer state."""

    def __init__(self, subtree: Any) -> None:
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as a pytree of plain Python containers and arrays (the parameters' tree
    with a ``JoinPoint`` per parameter), e.g. for pickling."""
    packed, tree, subtrees = opt_state
    return tree_unflatten(tree, [JoinPoint(tree_unflatten(subtree, leaves))
                                 for subtree, leaves in zip(subtrees, packed)])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of ``unpack_optimizer_state``."""
    joins, tree = tree_flatten(marked_pytree, is_leaf=lambda x: isinstance(x, JoinPoint))
    if not all(isinstance(j, JoinPoint) for j in joins):
        raise EmberValueError("pack_optimizer_state takes what unpack_optimizer_state "
                              "returned: a tree whose leaves are JoinPoints")
    states = [tree_flatten(j.subtree) for j in joins]
    return OptimizerState([leaves for leaves, _ in states], tree,
                          [subtree for _, subtree in states])

