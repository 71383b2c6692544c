"""Comparing results: exact for integers and bools, NaN-aware with dtype tolerances
for floats.

Floats agree when NaN sits in the same places, infinities are equal (sign included)
and finite values are close: ``|actual - expected| <= rtol * (|expected| + scale)``
plus the dtype's smallest normal, where ``scale`` is a tenth of the largest finite
``|expected|`` in the array. The scale term absorbs cancellation and summation-order
error relative to the array's magnitude; a wrong element, a wrong index or a
miscompiled operation is off by far more. -0.0 and 0.0 compare equal.

Compiled kernels may keep float16 / bfloat16 intermediates in float32 (rounding only
where a value is stored), as XLA does by default (``xla_allow_excess_precision``); the
runner then accepts, element by element, anything between the per-operation-rounded
result and the result of the same program computed in float32 throughout (``also``),
with the tolerance of the narrowest dtype the program computes in (``min_rtol``), since
rounding may happen in other places and orders.
"""
from __future__ import annotations

from typing import Sequence

import ml_dtypes
import numpy as np

from ember.core import dtypes

RTOL = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2, "float64": 1e-9}


def rtol_for(dtype: np.dtype) -> float:
    return RTOL.get(np.dtype(dtype).name, 2e-4)


def _bad(actual: np.ndarray, expected: np.ndarray, also: np.ndarray | None,
         min_rtol: float) -> np.ndarray:
    """Where floating ``actual`` is neither close to ``expected`` (same shape and dtype)
    nor, given ``also``, close to ``also`` or between the two."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    o = e if also is None else np.asarray(also).astype(np.float64)
    finite_e = e[np.isfinite(e)]
    scale = 0.1 * np.abs(finite_e).max() if finite_e.size else 0.0
    rtol = max(rtol_for(expected.dtype), min_rtol)
    tiny = float(ml_dtypes.finfo(expected.dtype).tiny)

    def near(x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            close = np.abs(a - x) <= rtol * (np.abs(x) + scale) + tiny
        return (np.isnan(a) & np.isnan(x)) | (np.isinf(x) & (a == x)) | (np.isfinite(x) & close)

    with np.errstate(invalid="ignore"):
        between = np.isfinite(a) & (np.minimum(e, o) <= a) & (a <= np.maximum(e, o))
    return ~(near(e) | near(o) | between)


def difference(actual: np.ndarray, expected: np.ndarray, also: np.ndarray | None = None,
               min_rtol: float = 0.0) -> str | None:
    """None if ``actual`` matches ``expected``, else what differs. With ``also`` (an
    alternative expectation), an element between the two counts as matching;
    ``min_rtol`` raises the dtype's tolerance (for results computed through a narrower
    dtype)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return (f"type {dtypes.short_name(actual.dtype)}{list(actual.shape)} != expected "
                f"{dtypes.short_name(expected.dtype)}{list(expected.shape)}")
    if not dtypes.is_floating(expected.dtype):
        bad = actual != expected
    else:
        bad = _bad(actual, expected, None if also is None else np.asarray(also, expected.dtype),
                   min_rtol)
    return _describe(bad, actual, expected) if bad.any() else None


def _describe(bad: np.ndarray, actual: np.ndarray, expected: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (f"{int(bad.sum())} of {bad.size} elements differ; first at {list(index)}: "
            f"got {actual[index]!r}, expected {expected[index]!r}")


def differences(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray],
                also: Sequence[np.ndarray] | None = None, min_rtol: float = 0.0) -> str | None:
    """None if every output matches (see ``difference``), else which outputs differ and
    how."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    alternatives = list(also) if also is not None else [None] * len(expected)
    found = [f"output {i}: {d}" for i, (a, e, o) in enumerate(zip(actual, expected, alternatives))
             if (d := difference(a, e, o, min_rtol)) is not None]
    return "; ".join(found) or None
