"""Cumulative (prefix) reductions along one axis: cumsum, cumprod, cummax, cummin and
cumlogsumexp, each optionally from the end (``reverse=True``), and ``associative_scan``.

They share the dtype policy and combining ufunc of the matching reduction in
``ember.ops.reductions``; cumlogsumexp combines with ``logaddexp``. cumsum is linear;
the others differentiate as the scan of their combining function (as JAX does), so
their tangents stay exact at zeros and ties and cost O(n) work in O(log n) steps.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.pytree import tree_flatten, tree_unflatten
from ember.errors import EmberTypeError, EmberValueError
from ember.ops import elementwise as ew, transformations
from ember.ops.reductions import MONOIDS, Monoid, accumulator_dtype, check_axes, normalize_axis
from ember.ops.sharding_rules import ShardingDecision, ShardingQuery, identity_map, mapped_sharding
from ember.ops.structural import (
    broadcast_in_dim, concatenate, expand_dims, pad, reshape, rev, slice_in_dim)
from ember.ops.rules import UndefinedPrimal, Zero, deflinear

__all__ = ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "associative_scan"]

_LOGADDEXP = Monoid(np.logaddexp, dtypes.is_floating, lambda d: -np.inf,
                    "real floating dtypes")

# primitive name -> how it combines
CUMULATIVE_MONOIDS: dict[str, Monoid] = {
    "cumsum": MONOIDS["reduce_sum"],
    "cumprod": MONOIDS["reduce_prod"],
    "cummax": MONOIDS["reduce_max"],
    "cummin": MONOIDS["reduce_min"],
    "cumlogsumexp": _LOGADDEXP,
}

CUMULATIVE: dict[str, Primitive] = {}


def _cumulative(name: str) -> Primitive:
    monoid = CUMULATIVE_MONOIDS[name]
    prim = Primitive(name)
    CUMULATIVE[name] = prim

    @prim.def_abstract_eval
    def _abstract(x: ShapedArray, *, axis: int, reverse: bool) -> ShapedArray:
        if not monoid.accepts(x.dtype):
            raise EmberTypeError(f"{name} does not accept dtype {x.dtype} (needs "
                                 f"{monoid.accepted_text})")
        check_axes(name, x.shape, (axis,))
        return x

    @prim.def_impl
    def _impl(x: np.ndarray, *, axis: int, reverse: bool) -> np.ndarray:
        x = np.asarray(x)
        acc = accumulator_dtype(x.dtype)
        values = np.flip(x, axis) if reverse else x
        with np.errstate(all="ignore"):
            out = monoid.ufunc.accumulate(values.astype(acc), axis=axis, dtype=acc)
        return (np.flip(out, axis) if reverse else out).astype(x.dtype)

    return prim


cumsum_p = _cumulative("cumsum")
cumprod_p = _cumulative("cumprod")
cummax_p = _cumulative("cummax")
cummin_p = _cumulative("cummin")
cumlogsumexp_p = _cumulative("cumlogsumexp")


def _bind_cumulative(prim: Primitive, operand: Any, axis: int, reverse: bool) -> Any:
    axis = normalize_axis(prim.name, axis, aval_of(operand).ndim)  # aval_of: not an array?
    return prim.bind(operand, axis=axis, reverse=bool(reverse))


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running sum along ``axis`` (from the end when ``reverse``)."""
    return _bind_cumulative(cumsum_p, operand, axis, reverse)


def cumprod(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running product along ``axis`` (from the end when ``reverse``)."""
    return _bind_cumulative(cumprod_p, operand, axis, reverse)


def cummax(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running maximum along ``axis``; NaN propagates."""
    return _bind_cumulative(cummax_p, operand, axis, reverse)


def cummin(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running minimum along ``axis``; NaN propagates."""
    return _bind_cumulative(cummin_p, operand, axis, reverse)


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running ``log(sum(exp(x)))`` along ``axis``, computed without overflow."""
    return _bind_cumulative(cumlogsumexp_p, operand, axis, reverse)


# --- associative_scan ----------------------------------------------------------------------

def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan of the pytree ``elems`` along ``axis`` with an associative ``fn``
    (as ``jax.lax.associative_scan``): ``out[i] = fn(... fn(x[0], x[1]) ..., x[i])``.

    Adjacent pairs are combined, the half-length result scanned recursively and the
    even positions filled in: O(n) applications of ``fn`` in O(log n) rounds.
    """
    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise EmberValueError("associative_scan needs at least one array in elems")
    axis = normalize_axis("associative_scan", axis, len(np.shape(leaves[0])))
    lengths = {np.shape(leaf)[axis] for leaf in leaves}
    if len(lengths) != 1:
        raise EmberValueError(f"associative_scan: arrays in elems have different lengths "
                              f"{sorted(lengths)} along axis {axis}")

    def combine(a: list, b: list) -> list:
        return tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))[0]

    if reverse:
        leaves = [rev(leaf, (axis,)) for leaf in leaves]
    out = _prefix_scan(combine, leaves, axis)
    if reverse:
        out = [rev(leaf, (axis,)) for leaf in out]
    return tree_unflatten(tree, out)


def _prefix_scan(combine: Callable[[list, list], list], elems: list, axis: int) -> list:
    n = np.shape(elems[0])[axis]
    if n < 2:
        return elems
    evens = [slice_in_dim(e, 0, None, 2, axis) for e in elems]
    odds = [slice_in_dim(e, 1, None, 2, axis) for e in elems]
    pairs = combine([slice_in_dim(e, 0, n // 2, 1, axis) for e in evens], odds)
    odd_out = _prefix_scan(combine, pairs, axis)  # prefixes ending at 1, 3, 5, ...
    n_even = (n + 1) // 2
    even_out = evens
    if n_even > 1:  # the prefix ending at 2k is the one ending at 2k-1, then x[2k]
        rest = combine([slice_in_dim(o, 0, n_even - 1, 1, axis) for o in odd_out],
                       [slice_in_dim(e, 1, None, 1, axis) for e in evens])
        even_out = [concatenate([slice_in_dim(e, 0, 1, 1, axis), r], axis)
                    for e, r in zip(evens, rest)]
    return [_interleave(e, o, axis) for e, o in zip(even_out, odd_out)]


def _interleave(even: Any, odd: Any, axis: int) -> Any:
    """``[e0, o0, e1, o1, ...]`` along ``axis`` (``even`` may be one longer)."""
    n_even, n_odd = np.shape(even)[axis], np.shape(odd)[axis]
    if n_odd < n_even:
        odd = pad(odd, np.zeros((), odd.dtype),
                  [(0, int(d == axis), 0) for d in range(len(np.shape(odd)))])
    pairs = concatenate([expand_dims(even, (axis + 1,)), expand_dims(odd, (axis + 1,))],
                        axis + 1)
    shape = list(np.shape(even))
    shape[axis] = 2 * n_even
    return slice_in_dim(reshape(pairs, shape), 0, n_even + n_odd, 1, axis)


# --- transformation rules ------------------------------------------------------------------

def _cumsum_transpose(ct: Any, x: UndefinedPrimal, *, axis: int, reverse: bool) -> list:
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


deflinear(cumsum_p, _cumsum_transpose)


def _logaddexp(a: Any, b: Any) -> Any:
    """``log(exp(a) + exp(b))`` without overflow; equal infinities give themselves."""
    zero = broadcast_in_dim(np.zeros((), a.dtype), a.shape, ())
    gap = ew.select_n(ew.eq(a, b), ew.sub(a, b), zero)
    return ew.add(ew.max(a, b), ew.log1p(ew.exp(ew.neg(ew.abs(gap)))))


_COMBINE: dict[Primitive, Callable[[Any, Any], Any]] = {
    cumprod_p: ew.mul, cummax_p: ew.max, cummin_p: ew.min, cumlogsumexp_p: _logaddexp,
}


def _scan_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, prim: Primitive,
              axis: int, reverse: bool):
    """The tangent of the scan of the combining function (exact at zeros and ties)."""
    (x,), (t,) = primals, tangents
    out = prim.bind(x, axis=axis, reverse=reverse)
    if not dtypes.is_inexact(x.dtype):
        return out, Zero.like(out)
    scan = functools.partial(associative_scan, _COMBINE[prim], axis=axis, reverse=reverse)
    _, (tangent,) = transformations.jvp_flat(lambda v: [scan(v)], [x], [t])
    return out, tangent


def _batch_cumulative(values: Sequence[Any], dims: Sequence[int | None], *, prim: Primitive,
                      axis: int, reverse: bool):
    (x,), (d,) = values, dims
    return prim.bind(x, axis=axis + (axis >= d), reverse=reverse), d


for _prim in CUMULATIVE.values():
    _prim.def_batch(functools.partial(_batch_cumulative, prim=_prim))
for _prim in _COMBINE:
    _prim.def_jvp(functools.partial(_scan_jvp, prim=_prim))
    _prim.waive("transpose", "not linear")


# --- sharding rules ----------------------------------------------------------------------

def _cumulative_sharding(query: ShardingQuery) -> ShardingDecision:
    """Split anywhere but along the accumulated axis, which stays whole."""
    ndim = query.in_avals[0].ndim
    return mapped_sharding(query, [identity_map(ndim, [query.params["axis"]])])


for _prim in CUMULATIVE.values():
    _prim.def_sharding(_cumulative_sharding)
