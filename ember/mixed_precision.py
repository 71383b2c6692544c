"""Mixed precision: dtype policies and dynamic loss scaling.

A ``Policy`` says which dtype parameters are stored in, which dtype computation runs
in and which dtype outputs come back in (``Policy.from_string("params=float32,
compute=bfloat16,output=float32")``). Matmuls and reductions accumulate in float32
whatever the compute dtype.

float16 has a narrow range, so gradients of a float16 loss underflow; the loss is
multiplied by a large scale before differentiation and the gradients divided by it.
``DynamicLossScale`` halves the scale and skips the step when a gradient overflows,
and doubles it after a run of good steps.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.core import dtypes
from ember.core.pytree import register_dataclass, tree_leaves, tree_map
from ember.errors import EmberValueError


def _cast_floating(tree: Any, dtype: np.dtype) -> Any:
    def cast(leaf: Any) -> Any:
        if hasattr(leaf, "dtype") and dtypes.is_floating(np.dtype(leaf.dtype)):
            return leaf.astype(dtype)
        return leaf

    return tree_map(cast, tree)


@dataclass(frozen=True)
class Policy:
    param_dtype: np.dtype
    compute_dtype: np.dtype
    output_dtype: np.dtype

    @classmethod
    def from_string(cls, spec: str) -> "Policy":
        """Parse ``"params=float32,compute=bfloat16,output=float32"`` (or one dtype for all)."""
        if "=" not in spec:
            dtype = dtypes.to_dtype(spec.strip())
            return cls(dtype, dtype, dtype)
        known = ("params", "compute", "output")
        parts = {}
        for item in spec.replace(" ", "").split(","):
            key, sep, value = item.partition("=")
            if not sep or key not in known:
                raise EmberValueError(f"bad policy entry {item!r} in {spec!r}: write "
                                      "'params=DTYPE,compute=DTYPE,output=DTYPE'")
            parts[key] = value
        default = dtypes.float32
        return cls(dtypes.to_dtype(parts.get("params", default)),
                   dtypes.to_dtype(parts.get("compute", default)),
                   dtypes.to_dtype(parts.get("output", parts.get("compute", default))))

    def cast_to_param(self, tree: Any) -> Any:
        return _cast_floating(tree, self.param_dtype)

    def cast_to_compute(self, tree: Any) -> Any:
        return _cast_floating(tree, self.compute_dtype)

    def cast_to_output(self, tree: Any) -> Any:
        return _cast_floating(tree, self.output_dtype)


def all_finite(tree: Any) -> Any:
    """A scalar bool array: True when no leaf holds an inf or NaN."""
    checks = [jnp.all(jnp.isfinite(leaf)) for leaf in tree_leaves(tree)
              if dtypes.is_inexact(np.dtype(leaf.dtype))]
    return functools.reduce(jnp.logical_and, checks, jnp.asarray(True))


@register_dataclass
@dataclass(frozen=True)
class DynamicLossScale:
    """Loss scale state; a pytree, so it passes through jit with the train state."""

    scale: Any
    good_steps: Any
    period: int = field(default=2000, metadata={"static": True})  # good steps before doubling
    factor: float = field(default=2.0, metadata={"static": True})
    min_scale: float = field(default=1.0, metadata={"static": True})

    @classmethod
    def create(cls, initial_scale: float = 2.0 ** 15, period: int = 2000) -> "DynamicLossScale":
        return cls(jnp.asarray(initial_scale, jnp.float32), jnp.asarray(0, jnp.int32), period)

    def scale_loss(self, loss: Any) -> Any:
        return loss * self.scale.astype(loss.dtype)

    def unscale(self, grads: Any) -> Any:
        inverse = 1.0 / self.scale
        return tree_map(lambda g: (g.astype(jnp.float32) * inverse).astype(g.dtype), grads)

    def adjust(self, grads_finite: Any) -> "DynamicLossScale":
        """The next state: halve on overflow, double after ``period`` good steps."""
        grown = self.good_steps + 1 >= self.period
        new_scale = jnp.where(
            grads_finite,
            jnp.where(grown, self.scale * self.factor, self.scale),
            jnp.maximum(self.scale / self.factor, self.min_scale))
        new_good = jnp.where(grads_finite, jnp.where(grown, 0, self.good_steps + 1), 0)
        return DynamicLossScale(new_scale, new_good.astype(jnp.int32), self.period,
                                self.factor, self.min_scale)


def select_tree(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Leafwise ``where(pred, a, b)``: keep the old params and state when a step overflowed."""
    return tree_map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)
