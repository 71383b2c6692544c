"""Comparing results: exact for integers and bools, NaN-aware with dtype tolerances
for floats.

Floats agree when NaN sits in the same places, infinities are equal (sign included)
and finite values are close: ``|actual - expected| <= rtol * (|expected| + scale)``
plus the dtype's smallest normal, where ``scale`` is a tenth of the largest finite
``|expected|`` in the array. The scale term absorbs cancellation and summation-order
error relative to the array's magnitude; a wrong element, a wrong index or a
miscompiled operation is off by far more. -0.0 and 0.0 compare equal.
"""
from __future__ import annotations

from typing import Sequence

import ml_dtypes
import numpy as np

from ember.core import dtypes

RTOL = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2, "float64": 1e-9}


def rtol_for(dtype: np.dtype) -> float:
    return RTOL.get(np.dtype(dtype).name, 2e-4)


def difference(actual: np.ndarray, expected: np.ndarray) -> str | None:
    """None if ``actual`` matches ``expected``, else what differs."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return (f"type {dtypes.short_name(actual.dtype)}{list(actual.shape)} != expected "
                f"{dtypes.short_name(expected.dtype)}{list(expected.shape)}")
    if not dtypes.is_floating(expected.dtype):
        bad = actual != expected
        return _describe(bad, actual, expected) if bad.any() else None
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    finite = np.isfinite(a) & np.isfinite(e)
    bad = (nan_a != nan_e) | (~finite & ~nan_a & ~nan_e & (a != e))
    if finite.any():
        scale = 0.1 * np.abs(e[np.isfinite(e)]).max()
        tolerance = rtol_for(expected.dtype) * (np.abs(e) + scale) + float(ml_dtypes.finfo(expected.dtype).tiny)
        with np.errstate(invalid="ignore"):
            bad |= finite & (np.abs(a - e) > tolerance)
    return _describe(bad, actual, expected) if bad.any() else None


def _describe(bad: np.ndarray, actual: np.ndarray, expected: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (f"{int(bad.sum())} of {bad.size} elements differ; first at {list(index)}: "
            f"got {actual[index]!r}, expected {expected[index]!r}")


def differences(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> str | None:
    """None if every output matches, else which outputs differ and how."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    found = [f"output {i}: {d}" for i, (a, e) in enumerate(zip(actual, expected))
             if (d := difference(a, e)) is not None]
    return "; ".join(found) or None
