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
runner then also accepts, element by element, the result of the same program computed
in float32 throughout (``also``).
"""
from __future__ import annotations

from typing import Sequence

import ml_dtypes
import numpy as np

from ember.core import dtypes

RTOL = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2, "float64": 1e-9}


def rtol_for(dtype: np.dtype) -> float:
    return RTOL.get(np.dtype(dtype).name, 2e-4)


def _bad(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Where floating ``actual`` and ``expected`` (same shape and dtype) disagree."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    finite = np.isfinite(a) & np.isfinite(e)
    bad = (nan_a != nan_e) | (~finite & ~nan_a & ~nan_e & (a != e))
    if finite.any():
        scale = 0.1 * np.abs(e[np.isfinite(e)]).max()
        tolerance = rtol_for(expected.dtype) * (np.abs(e) + scale) + float(ml_dtypes.finfo(expected.dtype).tiny)
        with np.errstate(invalid="ignore"):
            bad |= finite & (np.abs(a - e) > tolerance)
    return bad


def difference(actual: np.ndarray, expected: np.ndarray,
               also: np.ndarray | None = None) -> str | None:
    """None if ``actual`` matches ``expected``, else what differs. An element that
    matches ``also`` (an alternative expectation, same type) counts as matching."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return (f"type {dtypes.short_name(actual.dtype)}{list(actual.shape)} != expected "
                f"{dtypes.short_name(expected.dtype)}{list(expected.shape)}")
    if not dtypes.is_floating(expected.dtype):
        bad = actual != expected
    else:
        bad = _bad(actual, expected)
        if also is not None and bad.any():
            bad &= _bad(actual, np.asarray(also, expected.dtype))
    return _describe(bad, actual, expected) if bad.any() else None


def _describe(bad: np.ndarray, actual: np.ndarray, expected: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (f"{int(bad.sum())} of {bad.size} elements differ; first at {list(index)}: "
            f"got {actual[index]!r}, expected {expected[index]!r}")


def differences(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray],
                also: Sequence[np.ndarray] | None = None) -> str | None:
    """None if every output matches (``expected``, or elementwise ``also``), else which
    outputs differ and how."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    alternatives = list(also) if also is not None else [None] * len(expected)
    found = [f"output {i}: {d}" for i, (a, e, o) in enumerate(zip(actual, expected, alternatives))
             if (d := difference(a, e, o)) is not None]
    return "; ".join(found) or None
