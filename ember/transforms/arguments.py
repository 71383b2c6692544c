"""Pytree plumbing shared by the public transformations: arguments become flat lists of
arrays, functions become functions of flat lists, outputs (and aux data) come back."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import aval_of
from ember.ops.rules import float0
from ember.core.pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.core.trace import Tracer
from ember.errors import EmberTypeError, EmberValueError
from ember.runtime.array import Array
from ember.transforms.jvp import stop_gradient

__all__ = ["as_value", "flat_fun", "split_outputs", "argnums_tuple", "split_args",
           "check_grad_inputs"]


def as_value(leaf: Any) -> Any:
    """Arguments of transformations become arrays (tracers and Arrays pass through)."""
    if isinstance(leaf, (Tracer, Array)):
        return leaf
    if isinstance(leaf, (np.ndarray, np.generic)) and leaf.dtype == dtypes.canonicalize(
            leaf.dtype):
        return leaf
    from ember.runtime.dispatch import device_put

    try:
        return device_put(leaf)
    except (TypeError, ValueError):
        raise EmberTypeError(f"argument of type {type(leaf).__name__} is not an array; "
                             "transformations take arrays, scalars and pytrees of them") from None


def as_user_array(value: Any) -> Any:
    """A host array handed to the user (a seed or tangent passed through, or zeros) as an
    Array, as JAX's; float0 zeros (of integers) stay NumPy arrays, as JAX's do."""
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype != float0:
        from ember.runtime.dispatch import device_put

        return device_put(value)
    return value


def flat_fun(fun: Callable, in_tree: PyTreeDef, has_aux: bool = False):
    """``fun`` on a flat list of leaves. It returns the output leaves followed by the
    leaves of the auxiliary data (with zero derivative), so that they leave the
    transformation as ordinary outputs; ``store`` receives both trees."""
    store: dict[str, Any] = {}

    def flat(*leaves: Any) -> list[Any]:
        out = fun(*tree_unflatten(in_tree, leaves))
        aux: Any = None
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise EmberTypeError("a function transformed with has_aux=True must return a "
                                     f"pair (output, auxiliary data), got {type(out).__name__}")
            out, aux = out
        out_leaves, store["tree"] = tree_flatten(out)
        aux_leaves, store["aux_tree"] = tree_flatten(aux)
        # Traced aux leaves leave as outputs; other values (strings, ...) are kept as is.
        store["aux_static"] = [None if isinstance(x, Tracer) else x for x in aux_leaves]
        traced = [stop_gradient(x) for x in aux_leaves if isinstance(x, Tracer)]
        return [*out_leaves, *traced]

    return flat, store


def split_outputs(store: dict[str, Any], flat_outs: Sequence[Any],
                  ) -> tuple[Any, list[Any], Any]:
    """Split a flat function's results into (output tree, output leaves, aux tree)."""
    n = store["tree"].num_leaves
    traced = iter(flat_outs[n:])
    aux_leaves = [next(traced) if x is None else x for x in store["aux_static"]]
    aux = tree_unflatten(store["aux_tree"], aux_leaves)
    return tree_unflatten(store["tree"], flat_outs[:n]), list(flat_outs[:n]), aux


def argnums_tuple(argnums: int | Sequence[int], nargs: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise EmberValueError(f"{name}: argnums {argnums} out of range for a function "
                                  f"called with {nargs} positional arguments")
    return tuple(n % nargs for n in nums)


def split_args(fun: Callable, args: tuple, argnums: int | Sequence[int], name: str):
    """``fun`` as a function of the arguments at ``argnums`` only (the rest fixed), and
    those arguments, which must be floating-point (they are differentiated by ``name``)."""
    argnums = argnums_tuple(argnums, len(args), name)

    def partial_fun(*dyn: Any) -> Any:
        full = list(args)
        for n, value in zip(argnums, dyn):
            full[n] = value
        return fun(*full)

    dyn = tuple(args[n] for n in argnums)
    check_grad_inputs(dyn, argnums)
    return partial_fun, dyn


def check_grad_inputs(dyn: tuple, argnums: tuple[int, ...]) -> None:
    for n, arg in zip(argnums, dyn):
        for leaf in tree_flatten(arg)[0]:
            dtype = aval_of(leaf).dtype
            if not dtypes.is_inexact(dtype):
                raise EmberTypeError(
                    f"grad requires floating-point inputs, but argument {n} has dtype "
                    f"{dtype}; convert it with .astype(float) or leave it out of argnums")
