"""Public transformations over pytrees: jvp, linearize, vjp, grad, value_and_grad,
jacfwd, jacrev, hessian, vmap, stop_gradient (as in JAX).

Everything here flattens pytrees (``arguments``) and calls the flat interpreters of
``jvp``, ``vjp`` and ``vmap``; the composition of transformations is theirs. Jacobians
live in ``jacobians``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.pytree import tree_flatten, tree_unflatten
from ember.errors import EmberTypeError
from ember.sharding.vma import sum_cotangents
from ember.transforms.arguments import (as_user_array, as_value, flat_fun, split_args,
                                        split_outputs)
from ember.transforms.jacobians import hessian, jacfwd, jacobian, jacrev
from ember.transforms.jvp import has_tangent, jvp_flat, stop_gradient, zero_tangent_value
from ember.ops.rules import Zero, float0, instantiate
from ember.transforms.vjp import linearize_flat
from ember.transforms.vmap import vmap

__all__ = ["jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev",
           "jacobian", "hessian", "vmap", "stop_gradient"]


# --- forward mode ---------------------------------------------------------------------

def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), J·tangents)``: the Jacobian-vector product, in one pass."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise EmberTypeError("jvp takes primals and tangents as tuples or lists of arguments, "
                             f"got {type(primals).__name__} and {type(tangents).__name__}")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise EmberTypeError(f"jvp: primals and tangents have different structures: "
                             f"{p_tree} vs {t_tree}")
    p_leaves = [as_value(p) for p in p_leaves]
    t_leaves = [_check_tangent(p, t) for p, t in zip(p_leaves, t_leaves)]
    flat, store = flat_fun(fun, p_tree, has_aux)
    outs, out_tangents = jvp_flat(flat, p_leaves, t_leaves)
    out, out_leaves, aux = split_outputs(store, outs)
    tangents = [_user_tangent(t) for t in out_tangents[:len(out_leaves)]]
    result = (out, tree_unflatten(store["tree"], tangents))
    return (*result, aux) if has_aux else result


def _check_tangent(primal: Any, tangent: Any) -> Any:
    aval = aval_of(primal)
    if not has_tangent(aval):
        return Zero(aval)  # integer inputs: the tangent is float0, i.e. nothing
    tangent = as_value(tangent)
    t_aval = aval_of(tangent)
    if t_aval.shape != aval.shape or t_aval.dtype != aval.dtype:
        raise EmberTypeError(f"jvp: a tangent must have its primal's shape and dtype; primal "
                             f"{aval.describe()} got tangent {t_aval.describe()}")
    return tangent


def _user_tangent(tangent: Any) -> Any:
    return as_user_array(zero_tangent_value(tangent.aval) if isinstance(tangent, Zero) else tangent)


def linearize(fun: Callable, *primals: Any) -> tuple[Any, Callable]:
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` applies the linearization,
    staged once (evaluating it does not re-run ``fun``)."""
    leaves, in_tree = tree_flatten(primals)
    leaves = [as_value(p) for p in leaves]
    flat, store = flat_fun(fun, in_tree)
    outs, linear = linearize_flat(flat, leaves)
    out_tree = store["tree"]

    def f_jvp(*tangents: Any) -> Any:
        t_leaves, t_tree = tree_flatten(tangents)
        if t_tree != in_tree:
            raise EmberTypeError(f"linearized function expects tangents structured as "
                                 f"{in_tree}, got {t_tree}")
        checked = [_check_tangent(p, t) for p, t in zip(leaves, t_leaves)]
        return tree_unflatten(out_tree, [_user_tangent(t) for t in linear.jvp(checked)])

    return tree_unflatten(out_tree, outs), f_jvp


# --- reverse mode ---------------------------------------------------------------------

def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns one cotangent per primal
    (a tuple). With ``has_aux``, ``fun`` returns ``(out, aux)`` and so does this, plus aux."""
    leaves, in_tree = tree_flatten(primals)
    leaves = [as_value(p) for p in leaves]
    flat, store = flat_fun(fun, in_tree, has_aux)
    outs, linear = linearize_flat(flat, leaves)
    out, out_leaves, aux = split_outputs(store, outs)
    out_tree = store["tree"]
    out_avals = [aval_of(o) for o in out_leaves]
    aux_zeros = [Zero(aval_of(a)) for a in outs[len(out_leaves):]]

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = tree_flatten(cotangent)
        if ct_tree != out_tree:
            raise EmberTypeError(f"vjp: the cotangent must be structured as the output "
                                 f"{out_tree}, got {ct_tree}")
        cts = [_check_cotangent(a, ct) for a, ct in zip(out_avals, ct_leaves)]
        # Inside shard_map, a replicated primal's cotangent is summed over the shards.
        cts_in = sum_cotangents(leaves, linear.transpose([*cts, *aux_zeros]))
        return tree_unflatten(in_tree, [_user_cotangent(ct, aval_of(p))
                                        for ct, p in zip(cts_in, leaves)])

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _check_cotangent(aval: ShapedArray, ct: Any) -> Any:
    if not has_tangent(aval):
        return Zero(aval)
    ct = as_value(ct)
    if aval_of(ct).shape != aval.shape:
        raise EmberTypeError(f"vjp: cotangent of shape {aval_of(ct).shape} for an output of "
                             f"shape {aval.shape}; they must match")
    return ct


def _user_cotangent(ct: Any, aval: ShapedArray) -> Any:
    if not has_tangent(aval):
        return np.zeros(aval.shape, float0)
    return as_user_array(instantiate(ct))


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable:
    """A function returning ``(fun(*args), gradient)``; with ``has_aux``,
    ``((value, aux), gradient)``. The gradient is for the arguments at ``argnums``
    (a tuple of them when ``argnums`` is a tuple)."""
    name = getattr(fun, "__name__", "function")

    @functools.wraps(fun)
    def value_and_grad_fun(*args: Any, **kwargs: Any):
        bound = functools.partial(fun, **kwargs) if kwargs else fun
        partial_fun, dyn = split_args(bound, args, argnums, "grad")
        out, vjp_fn, *aux = vjp(partial_fun, *dyn, has_aux=has_aux)
        _check_scalar_output(out, name)
        grads = vjp_fn(np.ones((), aval_of(out).dtype))
        grads = grads[0] if isinstance(argnums, int) else grads
        value = (out, aux[0]) if has_aux else out
        return value, grads

    return value_and_grad_fun


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of scalar-valued ``fun`` with respect to the arguments at ``argnums``;
    with ``has_aux``, returns ``(gradient, aux)``."""
    value_and_grad_fun = value_and_grad(fun, argnums, has_aux)

    @functools.wraps(fun)
    def grad_fun(*args: Any, **kwargs: Any):
        value, grads = value_and_grad_fun(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return grad_fun


def _check_scalar_output(out: Any, name: str) -> None:
    leaves, tree = tree_flatten(out)
    if tree.node_type is not None:
        raise EmberTypeError(f"grad requires {name} to return a single scalar array, got a "
                             f"{type(out).__name__}; use ember.vjp or ember.jacrev for "
                             "structured outputs")
    aval = aval_of(leaves[0])
    if aval.shape != ():
        raise EmberTypeError(
            f"grad requires a scalar output, but {name} returned an array of shape "
            f"{aval.shape} ({aval.str_short()}); reduce it (e.g. .sum()) or use ember.vjp "
            "/ ember.jacrev for vector outputs")
    if not dtypes.is_floating(aval.dtype):
        raise EmberTypeError(f"grad requires a real floating-point output, but {name} "
                             f"returned {aval.dtype}")
