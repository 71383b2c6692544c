"""Jacobians and Hessians: ``jacfwd`` (one JVP per input element) and ``jacrev`` (one
VJP per output element), each vectorized over a standard basis with vmap."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.errors import EmberTypeError
from ember.transforms.arguments import as_value, flat_fun, split_args, split_outputs
from ember.transforms.jvp import jvp_flat
from ember.ops.rules import Zero, instantiate, move_batch_axis
from ember.ops.structural import reshape, transpose
from ember.transforms.vjp import linearize_flat
from ember.transforms.vmap import vmap_flat

__all__ = ["jacfwd", "jacrev", "jacobian", "hessian"]


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian by forward mode: ``jac[out leaf][in leaf]`` has shape
    ``out.shape + in.shape``; one JVP per input element, vectorized with vmap."""

    @functools.wraps(fun)
    def jacfun(*args: Any):
        flat, store, leaves, in_tree = _prepare_jacobian(fun, args, argnums, has_aux, "jacfwd")
        columns, aux = [], None
        for i, leaf in enumerate(leaves):
            def push(t: Any, i: int = i) -> list[Any]:
                tangents = [t if j == i else Zero(aval_of(p)) for j, p in enumerate(leaves)]
                primals_out, tangents_out = jvp_flat(flat, leaves, tangents)
                n = store["tree"].num_leaves
                return [*(instantiate(t) for t in tangents_out[:n]), *primals_out[n:]]

            outs, aux = _map_basis(push, _basis(aval_of(leaf)), store)
            columns.append([_rows_to_jac(o, aval_of(leaf), last=True) for o in outs])
        jac = _nest(store["tree"], in_tree, [list(row) for row in zip(*columns)], argnums)
        return (jac, aux) if has_aux else jac

    return jacfun


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian by reverse mode: one VJP per output element, vectorized with vmap."""

    @functools.wraps(fun)
    def jacfun(*args: Any):
        flat, store, leaves, in_tree = _prepare_jacobian(fun, args, argnums, has_aux, "jacrev")
        outs, linear = linearize_flat(flat, leaves)
        _, out_leaves, aux = split_outputs(store, outs)
        avals = [aval_of(o) for o in outs]
        rows = []
        for j, aval in enumerate(avals[:len(out_leaves)]):
            def pull(ct: Any, j: int = j) -> list[Any]:
                cts = [ct if k == j else Zero(a) for k, a in enumerate(avals)]
                return [instantiate(c) for c in linear.transpose(cts)]

            cts_in, _ = _map_basis(pull, _basis(aval))
            rows.append([_rows_to_jac(c, aval, last=False) for c in cts_in])
        jac = _nest(store["tree"], in_tree, rows, argnums)
        return (jac, aux) if has_aux else jac

    return jacfun


def jacobian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
             holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """As ``jax.jacobian``: the Jacobian by reverse mode (``jacrev``). Ember's Jacobians
    are of real functions of real inputs: ``holomorphic`` and ``allow_int`` are refused."""
    if holomorphic or allow_int:
        option = "holomorphic" if holomorphic else "allow_int"
        raise EmberTypeError(f"jacobian: {option}=True is not supported; differentiate "
                             "real floating-point inputs")
    return jacrev(fun, argnums, has_aux)


def _prepare_jacobian(fun: Callable, args: tuple, argnums: int | Sequence[int],
                      has_aux: bool, name: str):
    partial_fun, dyn = split_args(fun, args, argnums, name)
    leaves, in_tree = tree_flatten(dyn)
    flat, store = flat_fun(partial_fun, in_tree, has_aux)
    return flat, store, [as_value(p) for p in leaves], in_tree


def hessian(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian of scalar ``fun``: ``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums), argnums)


def _basis(aval: ShapedArray) -> np.ndarray:
    """The standard basis of ``aval``'s space: ``size`` unit arrays stacked on axis 0."""
    dtype = aval.dtype if dtypes.is_inexact(aval.dtype) else dtypes.default_float()
    return np.eye(aval.size, dtype=dtype).reshape((aval.size, *aval.shape))


def _map_basis(fun: Callable[[Any], list[Any]], basis: np.ndarray,
               store: dict[str, Any] | None = None) -> tuple[list[Any], Any]:
    """``fun`` applied to every row of ``basis`` at once. Returns its outputs stacked on
    axis 0 and, when ``store`` describes a flat function with aux data that ``fun``
    returns last, that aux data (the same for every row)."""
    outs, dims = vmap_flat(fun, basis.shape[0], [basis], [0])
    n_out = store["tree"].num_leaves if store else None
    stacked = [move_batch_axis(o, d, 0, basis.shape[0]) for o, d in zip(outs[:n_out], dims)]
    aux = split_outputs(store, outs)[2] if store else None
    return stacked, aux


def _rows_to_jac(rows: Any, basis_aval: ShapedArray, last: bool) -> Any:
    """Turn ``rows`` (one per basis element, on axis 0) into a Jacobian block.

    jacfwd's rows are indexed by input elements: move them last, then split them into
    the input's shape. jacrev's are indexed by output elements: split them in place.
    """
    rest = tuple(rows.shape[1:])
    if last:
        rows = transpose(rows, (*range(1, rows.ndim), 0))
        return reshape(rows, (*rest, *basis_aval.shape))
    return reshape(rows, (*basis_aval.shape, *rest))


def _nest(out_tree: PyTreeDef, in_tree: PyTreeDef, blocks: list[list[Any]],
          argnums: int | Sequence[int]) -> Any:
    """``blocks[out][in]`` as the output tree of input trees (one argument unwrapped)."""
    inner = [tree_unflatten(in_tree, row) for row in blocks]
    if isinstance(argnums, int):
        inner = [x[0] for x in inner]
    return tree_unflatten(out_tree, inner)
