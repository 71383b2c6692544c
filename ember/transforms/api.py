"""Public transformations over pytrees: jvp, linearize, vjp, grad, value_and_grad,
jacfwd, jacrev, hessian, vmap, stop_gradient (as in JAX).

Everything here flattens pytrees and calls the flat interpreters of ``jvp``, ``vjp``
and ``vmap``; the composition of transformations is theirs.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.pytree import PyTreeDef, tree_flatten, tree_map, tree_unflatten
from ember.core.trace import Tracer
from ember.errors import EmberTypeError, EmberValueError
from ember.runtime.array import Array
from ember.transforms.jvp import has_tangent, jvp_flat, stop_gradient_p, zero_tangent_value
from ember.transforms.rules import Zero, float0, instantiate, move_batch_axis
from ember.transforms.vjp import linearize_flat
from ember.transforms.vmap import vmap, vmap_flat

__all__ = ["jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev",
           "hessian", "vmap", "stop_gradient"]


# --- flattening helpers ------------------------------------------------------------------

def _as_value(leaf: Any) -> Any:
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


def _flat_fun(fun: Callable, in_tree: PyTreeDef, has_aux: bool = False):
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


def _outputs(store: dict[str, Any], flat_outs: Sequence[Any]) -> tuple[Any, list[Any], Any]:
    """Split a flat function's results into (output tree, output leaves, aux tree)."""
    n = store["tree"].num_leaves
    traced = iter(flat_outs[n:])
    aux_leaves = [next(traced) if x is None else x for x in store["aux_static"]]
    aux = tree_unflatten(store["aux_tree"], aux_leaves)
    return tree_unflatten(store["tree"], flat_outs[:n]), list(flat_outs[:n]), aux


def _argnums_tuple(argnums: int | Sequence[int], nargs: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise EmberValueError(f"{name}: argnums {argnums} out of range for a function "
                                  f"called with {nargs} positional arguments")
    return tuple(n % nargs for n in nums)


def _split_args(fun: Callable, args: tuple, argnums: tuple[int, ...]):
    """``fun`` as a function of the arguments at ``argnums`` only (the rest fixed)."""

    def partial_fun(*dyn: Any) -> Any:
        full = list(args)
        for n, value in zip(argnums, dyn):
            full[n] = value
        return fun(*full)

    return partial_fun, tuple(args[n] for n in argnums)


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
    p_leaves = [_as_value(p) for p in p_leaves]
    t_leaves = [_check_tangent(p, t) for p, t in zip(p_leaves, t_leaves)]
    flat, store = _flat_fun(fun, p_tree, has_aux)
    outs, out_tangents = jvp_flat(flat, p_leaves, t_leaves)
    out, out_leaves, aux = _outputs(store, outs)
    tangents = [_user_tangent(t) for t in out_tangents[:len(out_leaves)]]
    result = (out, tree_unflatten(store["tree"], tangents))
    return (*result, aux) if has_aux else result


def _check_tangent(primal: Any, tangent: Any) -> Any:
    aval = aval_of(primal)
    if not has_tangent(aval):
        return Zero(aval)  # integer inputs: the tangent is float0, i.e. nothing
    tangent = _as_value(tangent)
    t_aval = aval_of(tangent)
    if t_aval.shape != aval.shape or t_aval.dtype != aval.dtype:
        raise EmberTypeError(f"jvp: a tangent must have its primal's shape and dtype; primal "
                             f"{aval.str_short()} got tangent {t_aval.str_short()}")
    return tangent


def _user_tangent(tangent: Any) -> Any:
    return zero_tangent_value(tangent.aval) if isinstance(tangent, Zero) else tangent


def linearize(fun: Callable, *primals: Any) -> tuple[Any, Callable]:
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` applies the linearization,
    staged once (evaluating it does not re-run ``fun``)."""
    leaves, in_tree = tree_flatten(primals)
    leaves = [_as_value(p) for p in leaves]
    flat, store = _flat_fun(fun, in_tree)
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
    leaves = [_as_value(p) for p in leaves]
    flat, store = _flat_fun(fun, in_tree, has_aux)
    outs, linear = linearize_flat(flat, leaves)
    out, out_leaves, aux = _outputs(store, outs)
    out_tree = store["tree"]
    out_avals = [aval_of(o) for o in out_leaves]
    aux_zeros = [Zero(aval_of(a)) for a in outs[len(out_leaves):]]

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = tree_flatten(cotangent)
        if ct_tree != out_tree:
            raise EmberTypeError(f"vjp: the cotangent must be structured as the output "
                                 f"{out_tree}, got {ct_tree}")
        cts = [_check_cotangent(a, ct) for a, ct in zip(out_avals, ct_leaves)]
        cts_in = linear.transpose([*cts, *aux_zeros])
        return tree_unflatten(in_tree, [_user_cotangent(ct, aval_of(p))
                                        for ct, p in zip(cts_in, leaves)])

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _check_cotangent(aval: ShapedArray, ct: Any) -> Any:
    if not has_tangent(aval):
        return Zero(aval)
    ct = _as_value(ct)
    if aval_of(ct).shape != aval.shape:
        raise EmberTypeError(f"vjp: cotangent of shape {aval_of(ct).shape} for an output of "
                             f"shape {aval.shape}; they must match")
    return ct


def _user_cotangent(ct: Any, aval: ShapedArray) -> Any:
    if not has_tangent(aval):
        return np.zeros(aval.shape, float0)
    return instantiate(ct)


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable:
    """A function returning ``(fun(*args), gradient)``; with ``has_aux``,
    ``((value, aux), gradient)``. The gradient is for the arguments at ``argnums``
    (a tuple of them when ``argnums`` is a tuple)."""
    name = getattr(fun, "__name__", "function")

    @functools.wraps(fun)
    def value_and_grad_fun(*args: Any, **kwargs: Any):
        nums = _argnums_tuple(argnums, len(args), "grad")
        bound = functools.partial(fun, **kwargs) if kwargs else fun
        partial_fun, dyn = _split_args(bound, args, nums)
        _check_grad_inputs(dyn, nums)
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


def _check_grad_inputs(dyn: tuple, argnums: tuple[int, ...]) -> None:
    for n, arg in zip(argnums, dyn):
        for leaf in tree_flatten(arg)[0]:
            dtype = aval_of(leaf).dtype
            if not dtypes.is_inexact(dtype):
                raise EmberTypeError(
                    f"grad requires floating-point inputs, but argument {n} has dtype "
                    f"{dtype}; convert it with .astype(float) or leave it out of argnums")


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


# --- Jacobians ------------------------------------------------------------------------

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
        _, out_leaves, aux = _outputs(store, outs)
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


def _prepare_jacobian(fun: Callable, args: tuple, argnums: int | Sequence[int],
                      has_aux: bool, name: str):
    nums = _argnums_tuple(argnums, len(args), name)
    partial_fun, dyn = _split_args(fun, args, nums)
    _check_grad_inputs(dyn, nums)
    leaves, in_tree = tree_flatten(dyn)
    flat, store = _flat_fun(partial_fun, in_tree, has_aux)
    return flat, store, [_as_value(p) for p in leaves], in_tree


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
    aux = _outputs(store, outs)[2] if store else None
    return stacked, aux


def _rows_to_jac(rows: Any, basis_aval: ShapedArray, last: bool) -> Any:
    """Turn ``rows`` (one per basis element, on axis 0) into a Jacobian block.

    jacfwd's rows are indexed by input elements: move them last, then split them into
    the input's shape. jacrev's are indexed by output elements: split them in place.
    """
    from ember.ops.structural import reshape, transpose

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


# --- stop_gradient --------------------------------------------------------------------

def stop_gradient(x: Any) -> Any:
    """``x`` itself, but with zero derivative (applies to every leaf of a pytree)."""
    def stop(leaf: Any) -> Any:
        if dtypes.is_inexact(aval_of(leaf).dtype):
            return stop_gradient_p.bind(leaf)
        return leaf

    return tree_map(stop, x)
