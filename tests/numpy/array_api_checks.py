"""Shared pieces of the Array API (2024.12) conformance checks in ``test_array_api_*.py``.

Every check runs on ``ember.numpy`` and on NumPy 2.4 (which also implements the standard),
so the suite states how much of it each one passes. Where NumPy is known not to conform,
its run is a strict xfail naming why: it fails the suite if NumPy changes, and Ember's run
of the same check must pass.

Count the results with ``pytest tests/numpy/test_array_api_*.py -q -rA`` and the id
prefixes ``ember-`` / ``numpy-``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest

import ember.numpy as enp

NAMESPACES = {"ember": enp, "numpy": np}


def conformance_params(cases: Iterable[tuple[str, Any]],
                       numpy_deviates: dict[str, str] | None = None,
                       ember_deviates: dict[str, str] | None = None) -> list:
    """``pytest.param(xp, case)`` for every namespace and case, ids ``<namespace>-<case>``.

    ``numpy_deviates`` / ``ember_deviates`` map a case id to why that namespace does not
    conform there (Ember's are known limitations, listed in its docs).
    """
    cases = list(cases)
    deviates = {"numpy": numpy_deviates or {}, "ember": ember_deviates or {}}
    params = []
    for name, xp in NAMESPACES.items():
        for case_id, case in cases:
            marks = ()
            if case_id in deviates[name]:
                marks = pytest.mark.xfail(strict=True, reason=deviates[name][case_id])
            params.append(pytest.param(xp, case, id=f"{name}-{case_id}", marks=marks))
    return params


def each_namespace(numpy_deviates: str | None = None) -> pytest.MarkDecorator:
    """Parametrize a single check over the namespaces as ``xp``."""
    params = []
    for name, xp in NAMESPACES.items():
        marks = ()
        if name == "numpy" and numpy_deviates is not None:
            marks = pytest.mark.xfail(strict=True, reason=numpy_deviates)
        params.append(pytest.param(xp, id=name, marks=marks))
    return pytest.mark.parametrize("xp", params)


# --- values as the standard states them ----------------------------------------------------

class Unspecified:
    """A result the standard leaves partly open: a zero or an infinity of either sign."""

    def __init__(self, magnitude: float) -> None:
        self.magnitude = magnitude

    def matches(self, value: float) -> bool:
        return abs(value) == self.magnitude

    def __neg__(self) -> Unspecified:
        return self

    def __repr__(self) -> str:
        return f"±{self.magnitude}"


ANY_ZERO = Unspecified(0.0)
ANY_INF = Unspecified(math.inf)


class SignedNaN:
    """A NaN whose sign bit the standard fixes (copysign, signbit)."""

    def __init__(self, negative: bool) -> None:
        self.negative = negative

    def matches(self, value: float) -> bool:
        return math.isnan(value) and (math.copysign(1, value) < 0) == self.negative

    def __repr__(self) -> str:
        return "-NaN" if self.negative else "+NaN"


class OneOf:
    """Either of the results the standard allows (floor_divide may follow Python)."""

    def __init__(self, *values: float) -> None:
        self.values = values

    def matches(self, value: float) -> bool:
        return any(same_value(value, v) for v in self.values)

    def __repr__(self) -> str:
        return " or ".join(map(repr, self.values))


def same_value(actual: float, expected: Any, rel: float = 1e-6) -> bool:
    """IEEE equality that tells -0 from +0 and NaN equal to NaN; approximate for other
    finite values (results like pi/4 are implementation-dependent approximations)."""
    actual = float(actual)
    if isinstance(expected, (Unspecified, SignedNaN, OneOf)):
        return expected.matches(actual)
    expected = float(expected)
    if math.isnan(expected):
        return math.isnan(actual)
    if expected == 0.0 or math.isinf(expected):
        return actual == expected and math.copysign(1, actual) == math.copysign(1, expected)
    return math.isclose(actual, expected, rel_tol=rel)


def same_complex(actual: complex, expected: tuple[Any, Any], rel: float = 1e-6) -> bool:
    return (same_value(actual.real, expected[0], rel)
            and same_value(actual.imag, expected[1], rel))
