"""Activation functions and friends, as ``jax.nn``: every one is a composition of
``ember.numpy`` functions, written in its numerically stable form (softplus through
``logaddexp``, softmax and logsumexp shifted by a max that carries no gradient, ELUs
that never evaluate ``exp`` of a large positive input).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

from ember import lax
from ember import numpy as enp
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._promotion import ensure_array, promote_args_inexact
from ember.transforms.api import stop_gradient
from ember.transforms.custom import custom_jvp

__all__ = [
    "relu", "relu6", "gelu", "silu", "swish", "sigmoid", "log_sigmoid", "softplus",
    "soft_sign", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "elu", "celu",
    "selu", "leaky_relu", "glu", "mish", "squareplus", "tanh", "softmax", "log_softmax",
    "logsumexp", "logmeanexp", "log1mexp", "one_hot", "standardize", "identity",
    "sparse_plus", "sparse_sigmoid",
]

Axis = int | Sequence[int] | None


def _inexact(x: Any) -> Any:
    return promote_args_inexact(x)[0]


def identity(x: Any) -> Any:
    return ensure_array(x)


@custom_jvp
def relu(x: Any) -> Any:
    """``max(x, 0)``; its derivative at 0 is 0, as JAX's (``maximum``'s is 1/2 there)."""
    return enp.maximum(x, 0)


@relu.defjvp
def _relu_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """In terms of the output (positive exactly where ``x`` is): the backward pass then
    reads the activations, which the next layer reads anyway, and the forward keeps no
    pre-activations for it."""
    (x,), (x_dot,) = primals, tangents
    y = relu(x)
    return y, enp.where(enp.greater(y, 0), x_dot, enp.zeros_like(x_dot))


@custom_jvp
def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``; its derivative at 0 and 6 is 0, as JAX's."""
    return enp.minimum(enp.maximum(x, 0), 6)


@relu6.defjvp
def _relu6_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x,), (x_dot,) = primals, tangents
    y = relu6(x)
    inside = enp.logical_and(enp.greater(y, 0), enp.less(y, 6))
    return y, enp.where(inside, x_dot, enp.zeros_like(x_dot))


def sigmoid(x: Any) -> Any:
    """``1 / (1 + exp(-x))`` (lax.logistic: no overflow for either sign)."""
    return lax.logistic(_inexact(x))


def log_sigmoid(x: Any) -> Any:
    """``log(sigmoid(x)) = -softplus(-x)``."""
    return enp.negative(softplus(enp.negative(_inexact(x))))


def softplus(x: Any) -> Any:
    """``log(1 + exp(x))``, as ``logaddexp(x, 0)``."""
    return enp.logaddexp(_inexact(x), 0)


def soft_sign(x: Any) -> Any:
    """``x / (|x| + 1)``."""
    x = _inexact(x)
    return enp.true_divide(x, enp.add(enp.abs(x), 1))


def silu(x: Any) -> Any:
    """``x * sigmoid(x)`` (also called swish)."""
    x = _inexact(x)
    return enp.multiply(x, sigmoid(x))


swish = silu


def gelu(x: Any, approximate: bool = True) -> Any:
    """Gaussian error linear unit: the tanh approximation by default (as JAX), or the
    exact ``x * Phi(x)`` (computed with erfc, accurate for negative x)."""
    x = _inexact(x)
    if approximate:
        inner = enp.multiply(math.sqrt(2 / math.pi), enp.add(x, enp.multiply(0.044715,
                                                                                enp.power(x, 3))))
        return enp.multiply(enp.multiply(0.5, x), enp.add(1, enp.tanh(inner)))
    return enp.multiply(x, enp.multiply(0.5, lax.erfc(enp.multiply(x, -math.sqrt(0.5)))))


def hard_sigmoid(x: Any) -> Any:
    """``relu6(x + 3) / 6``."""
    return enp.true_divide(relu6(enp.add(_inexact(x), 3)), 6)


def hard_silu(x: Any) -> Any:
    """``x * hard_sigmoid(x)``."""
    x = _inexact(x)
    return enp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def hard_tanh(x: Any) -> Any:
    """``clip(x, -1, 1)``, differentiated as JAX's: slope 1 at -1 and 1 (and for NaN),
    where clip's would be 1/2 (and 0)."""
    return enp.where(enp.greater(x, 1), 1, enp.where(enp.less(x, -1), -1, x))


def _negative_part(x: Any) -> Any:
    """``x`` where negative, else 0: keeps exp() of the unused branch finite."""
    return enp.where(enp.greater(x, 0), 0, x)


def elu(x: Any, alpha: float = 1.0) -> Any:
    """``x`` for positive inputs, ``alpha * (exp(x) - 1)`` otherwise."""
    x = _inexact(x)
    return enp.where(enp.greater(x, 0), x, enp.multiply(alpha, enp.expm1(_negative_part(x))))


def celu(x: Any, alpha: float = 1.0) -> Any:
    """Continuously differentiable ELU: ``alpha * (exp(x / alpha) - 1)`` below zero."""
    x = _inexact(x)
    negative = enp.multiply(alpha, enp.expm1(enp.true_divide(_negative_part(x), alpha)))
    return enp.where(enp.greater(x, 0), x, negative)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: Any) -> Any:
    """Scaled ELU with the self-normalizing constants."""
    return enp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))


def leaky_relu(x: Any, negative_slope: float = 1e-2) -> Any:
    """``x`` for non-negative inputs, ``negative_slope * x`` otherwise."""
    x = _inexact(x)
    return enp.where(enp.greater_equal(x, 0), x, enp.multiply(negative_slope, x))


def glu(x: Any, axis: int = -1) -> Any:
    """Gated linear unit: the first half of ``axis`` times sigmoid of the second half."""
    x = _inexact(x)
    size = x.shape[axis]
    if size % 2:
        raise EmberValueError(f"glu: axis {axis} of shape {x.shape} must have an even size")
    first, second = enp.split(x, 2, axis)
    return enp.multiply(first, sigmoid(second))


def mish(x: Any) -> Any:
    """``x * tanh(softplus(x))``."""
    x = _inexact(x)
    return enp.multiply(x, enp.tanh(softplus(x)))


def squareplus(x: Any, b: float = 4) -> Any:
    """``(x + sqrt(x**2 + b)) / 2``."""
    x = _inexact(x)
    return enp.true_divide(enp.add(x, enp.sqrt(enp.add(enp.square(x), b))), 2)


def tanh(x: Any) -> Any:
    return enp.tanh(x)


def _shift(x: Any, axis: Axis, where: Any) -> Any:
    """The max over ``axis`` (finite, gradient-free): subtracting it avoids overflow."""
    x_max = enp.max(x, axis, keepdims=True, where=where, initial=-math.inf)
    return stop_gradient(enp.where(enp.isfinite(x_max), x_max, 0))


def softmax(x: Any, axis: Axis = -1, where: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` over ``axis`` (masked entries, ``where=False``, are 0)."""
    x = _inexact(x)
    if where is None:
        return _softmax(x, axis if axis is None or isinstance(axis, int) else tuple(axis))
    return _softmax_composed(x, axis, where)


def _softmax_composed(x: Any, axis: Axis, where: Any) -> Any:
    unnormalized = enp.exp(enp.subtract(x, _shift(x, axis, where)))
    if where is not None:
        unnormalized = enp.where(where, unnormalized, 0)
    return enp.true_divide(unnormalized, enp.sum(unnormalized, axis, keepdims=True))


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _softmax(x: Any, axis: Axis) -> Any:
    return _softmax_composed(x, axis, None)


@_softmax.defjvp
def _softmax_jvp(axis: Axis, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """``y * (dx - sum(y * dx))``, in terms of the output alone (as JAX): the backward
    pass then reads the probabilities, not the exponentials and their sum (which
    differentiating the composition keeps alive and divides again)."""
    (x,), (x_dot,) = primals, tangents
    y = _softmax(x, axis)
    return y, y * (x_dot - enp.sum(y * x_dot, axis, keepdims=True))


def log_softmax(x: Any, axis: Axis = -1, where: Any = None) -> Any:
    """``x - logsumexp(x)`` over ``axis``."""
    x = _inexact(x)
    shifted = enp.subtract(x, _shift(x, axis, where))
    exp_shifted = enp.exp(shifted)
    if where is not None:
        exp_shifted = enp.where(where, exp_shifted, 0)
    out = enp.subtract(shifted, enp.log(enp.sum(exp_shifted, axis, keepdims=True)))
    return out if where is None else enp.where(where, out, -math.inf)


def logsumexp(a: Any, axis: Axis = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False, where: Any = None) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis`` without overflow; with ``return_sign`` also
    the sign of the sum (a negative sum is otherwise NaN)."""
    a = _inexact(a)
    shift = _shift(a, axis, where)
    exp_a = enp.exp(enp.subtract(a, shift))
    if b is not None:
        exp_a = enp.multiply(b, exp_a)
    total = enp.sum(exp_a, axis, keepdims=True, where=where)
    sign = enp.sign(total)
    out = enp.add(enp.log(enp.abs(total)), shift)
    if not keepdims:
        axes = tuple(range(a.ndim)) if axis is None else axis
        out, sign = enp.squeeze(out, axes), enp.squeeze(sign, axes)
    if return_sign:
        return out, sign
    if b is not None:
        out = enp.where(enp.less(sign, 0), math.nan, out)
    return out


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    """A new axis of length ``num_classes`` with 1 at index ``x`` (all zeros when ``x`` is
    out of range)."""
    x = ensure_array(x)
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float()
    axis = canonicalize_axis(axis, x.ndim + 1)  # the new axis of the result
    labels = enp.expand_dims(x, axis)
    shape = list(labels.shape)
    shape[axis] = int(num_classes)
    classes = lax.broadcasted_iota(labels.dtype if dtypes.is_integer(labels.dtype)
                                   else dtypes.default_int(), tuple(shape), axis)
    return enp.equal(labels, classes).astype(dtype)


def standardize(x: Any, axis: Axis = -1, mean: Any = None, variance: Any = None,
                epsilon: float = 1e-5, where: Any = None, *, algorithm: str = "fast") -> Any:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis``. The variance is
    ``mean(x**2) - mean**2`` ("fast", one pass, clipped at 0 since rounding can make it
    negative) or ``mean((x - mean)**2)`` ("stable")."""
    x = _inexact(x)
    if algorithm not in ("fast", "stable"):
        raise EmberValueError(f"standardize: algorithm must be 'fast' or 'stable', got "
                              f"{algorithm!r}")
    if mean is None:
        mean = enp.mean(x, axis, keepdims=True, where=where)
    if variance is None and algorithm == "stable":
        variance = enp.mean(enp.square(enp.subtract(x, mean)), axis, keepdims=True,
                            where=where)
    elif variance is None:
        variance = enp.maximum(enp.subtract(enp.mean(enp.square(x), axis, keepdims=True,
                                                     where=where), enp.square(mean)), 0)
    return enp.multiply(enp.subtract(x, mean), lax.rsqrt(enp.add(variance, epsilon)))


def logmeanexp(x: Any, axis: Axis = None, where: Any = None, keepdims: bool = False) -> Any:
    """``log(mean(exp(x)))`` over ``axis`` (of the entries where ``where``), without
    overflow."""
    x = _inexact(x)
    ones = enp.ones_like(x) if where is None else enp.where(where, 1.0, 0.0).astype(x.dtype)
    count = enp.sum(enp.broadcast_to(ones, x.shape), axis, keepdims=keepdims)
    return enp.subtract(logsumexp(x, axis, keepdims=keepdims, where=where), enp.log(count))


def log1mexp(x: Any) -> Any:
    """``log(1 - exp(-x))`` for ``x >= 0``, accurate at both ends: through ``expm1``
    below log 2 and ``log1p`` above (Maechler's rule). Its derivative is
    ``1 / expm1(x)``."""
    return _log1mexp(_inexact(x))


@custom_jvp
def _log1mexp(x: Any) -> Any:
    return enp.where(x < math.log(2.0), enp.log(enp.negative(enp.expm1(enp.negative(x)))),
                     enp.log1p(enp.negative(enp.exp(enp.negative(x)))))


@_log1mexp.defjvp
def _log1mexp_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x,), (x_dot,) = primals, tangents
    return _log1mexp(x), enp.true_divide(x_dot, enp.expm1(x))


def sparse_plus(x: Any) -> Any:
    """0 below -1, ``x`` above 1 and ``(x + 1)**2 / 4`` between: a smooth relu with
    exact zeros (the integral of ``sparse_sigmoid``)."""
    x = _inexact(x)
    return enp.where(x <= -1.0, 0.0, enp.where(x >= 1.0, x, enp.square(x + 1.0) / 4))


def sparse_sigmoid(x: Any) -> Any:
    """``clip((x + 1) / 2, 0, 1)``: a sigmoid that reaches 0 and 1."""
    return 0.5 * enp.clip(_inexact(x) + 1.0, 0.0, 2.0)
