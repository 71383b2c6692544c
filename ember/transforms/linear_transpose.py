"""``ember.linear_transpose``: the transpose of a function promised to be linear, as
``jax.linear_transpose``: traced once, then run backwards (``backward_pass``) from the
output cotangent, without the forward pass a ``vjp`` would compute. An operation that
is not linear in the inputs has no transpose and is an error naming it."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.pytree import tree_flatten, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.errors import EmberTypeError
from ember.ops.elementwise import convert_element_type
from ember.ops.rules import UndefinedPrimal, instantiate
from ember.transforms.transpose import backward_pass

__all__ = ["linear_transpose"]


def _aval(primal: Any) -> ShapedArray:
    """Only the shape and dtype of a primal count (an array, or a ShapeDtypeStruct)."""
    found = getattr(primal, "aval", None)  # (an Array's or a tracer's)
    if isinstance(found, ShapedArray):
        return found
    if hasattr(primal, "shape") and hasattr(primal, "dtype"):
        return ShapedArray(tuple(primal.shape), dtypes.canonicalize(np.dtype(primal.dtype)))
    return aval_of(primal)


def linear_transpose(fun: Callable, *primals: Any, reduce_axes: tuple = ()) -> Callable:
    """The transpose of linear ``fun`` at the shapes and dtypes of ``primals``: a function
    of a cotangent shaped as ``fun``'s output that returns a tuple shaped as ``primals``
    (each of its primal's dtype), as ``jax.linear_transpose``."""
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported (JAX "
                                  "has deprecated it)")
    leaves, in_tree = tree_flatten(primals)
    in_avals = [_aval(p) for p in leaves]
    out_tree: list = []

    def flat_fun(*flat: Any) -> list[Any]:
        out_leaves, tree = tree_flatten(fun(*tree_unflatten(in_tree, list(flat))))
        out_tree.append(tree)
        return out_leaves

    graph = trace_to_graph(flat_fun, in_avals)
    out_avals = graph.out_avals
    kinds = [a.dtype for a in [*in_avals, *out_avals]]
    if not (all(dtypes.is_inexact(d) for d in kinds) or all(dtypes.is_integer(d) for d in kinds)):
        raise EmberTypeError(
            f"linear_transpose only supports [float or complex] -> [float or complex], and "
            f"integer -> integer functions, but got {[str(a.dtype) for a in in_avals]} -> "
            f"{[str(a.dtype) for a in out_avals]}")

    def transposed(out_cotangent: Any) -> tuple:
        cts, tree = tree_flatten(out_cotangent)
        if tree != out_tree[0]:
            raise EmberTypeError(f"cotangent tree does not match the function's output: "
                                 f"expected {out_tree[0]}, got {tree}")
        for ct, aval in zip(cts, out_avals):
            if tuple(np.shape(ct)) != aval.shape or aval_of(ct).dtype != aval.dtype:
                raise EmberTypeError(f"cotangent {aval_of(ct).str_short()} does not match "
                                     f"the function's output {aval.str_short()}")
        in_cts = backward_pass(graph, graph.constvals, [UndefinedPrimal(a) for a in in_avals],
                               cts)
        in_cts = [_of_dtype(instantiate(ct), aval) for ct, aval in zip(in_cts, in_avals)]
        return tree_unflatten(in_tree, in_cts)

    return transposed


def _of_dtype(ct: Any, aval: ShapedArray) -> Any:
    """The cotangent in its primal's dtype (as JAX: a complex one may lose its imaginary
    part)."""
    return ct if aval_of(ct).dtype == aval.dtype else convert_element_type(ct, aval.dtype)
