"""Cumulative (prefix) reductions along one axis: cumsum, cumprod, cummax, cummin and
cumlogsumexp, each optionally from the end (``reverse=True``).

They share the dtype policy and combining ufunc of the matching reduction in
``ember.ops.reductions``; cumlogsumexp combines with ``logaddexp``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError
from ember.ops.reductions import MONOIDS, Monoid, accumulator_dtype, check_axes, normalize_axis

__all__ = ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]

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
    axis = normalize_axis(prim.name, axis, len(np.shape(operand)))
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
