"""The ATen -> Ember table itself, and what its lowerings share: ATen's dims and the
cast to a result dtype."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import ember.numpy as jnp
from ember import lax
from ember.torch.promotion import Kind, is_array, promote

aten = torch.ops.aten
prims = torch.ops.prims

LOWERINGS: dict[Any, Callable[..., Any]] = {}
# Effectful ATen ops (which AOTAutograd threads through ``with_effects`` and a token)
# that Ember lowers: each returns the op's outputs as a tuple.
EFFECTS: dict[Any, Callable[..., tuple]] = {}


def lowers(*overloads: Any) -> Callable[[Callable], Callable]:
    """Register the decorated function as the lowering of every ATen ``overloads``."""
    def register(fn: Callable) -> Callable:
        for overload in overloads:
            LOWERINGS[overload] = fn
        return fn
    return register


def lowers_effect(op: Any) -> Callable[[Callable], Callable]:
    """Register the decorated function as the lowering of the effectful ATen ``op``."""
    def register(fn: Callable) -> Callable:
        EFFECTS[op] = fn
        return fn
    return register


@lowers(torch.ops.higher_order.with_effects)
def _with_effects(token: Any, op: Any, *args: Any, **kwargs: Any) -> tuple:
    """An effectful op: its lowering, in program order (the token passes through)."""
    return (token, *EFFECTS[op](*args, **kwargs))


def cast(value: Any, dtype: np.dtype) -> Any:
    """``value`` (an array or a Python scalar) as an array of ``dtype``."""
    if is_array(value):
        return value if value.dtype == dtype else lax.convert_element_type(value, dtype)
    return jnp.asarray(value, dtype=dtype)


def reduction_dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """ATen's reduction dims: None or [] mean every dim; negative dims count from the end."""
    if ndim == 0:  # (a 0-d tensor reduces over dim 0 or -1 as over nothing)
        return ()
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return tuple(d % ndim for d in dim)


def dim_index(dim: int, ndim: int) -> int:
    """ATen's single dim (negative counts from the end; a 0-d tensor's dim is 0)."""
    return dim % max(ndim, 1)


def elementwise(fn: Callable, kind: Kind = Kind.DEFAULT) -> Callable:
    """An ATen elementwise op: operands cast to the computation dtype, the result to the
    result dtype, as ATen's type promotion decides."""
    def lowering(*operands: Any) -> Any:
        compute, result = promote(*operands, kind=kind)
        return cast(fn(*[cast(x, compute) for x in operands]), result)
    return lowering


def register_elementwise(table: dict[tuple, Callable], kind: Kind = Kind.DEFAULT) -> None:
    """``elementwise`` lowerings of ``{overloads: fn}``."""
    for overloads, fn in table.items():
        lowers(*overloads)(elementwise(fn, kind))
