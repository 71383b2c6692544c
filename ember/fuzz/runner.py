"""The differential runner: one program, its variants, every target, against the oracle.

Outcomes per (variant, target):
- the oracle raises an Ember error: the variant is *rejected* (the program asks for
  something Ember documents as unsupported); nothing is compared;
- the oracle raises anything else: a ``crash`` of the reference;
- a target raises an Ember error where the oracle did not: an ``error``;
- a target raises anything else: a ``crash`` (a bare Python or NumPy error escaped);
- a target's values differ (see ``ember.fuzz.compare``): a ``mismatch``.
"""
from __future__ import annotations

import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from ember.config import enable_x64
from ember.core import dtypes
from ember.errors import EmberError
from ember.fuzz.compare import differences, rtol_for
from ember.fuzz.program import Program, compile_source
from ember.fuzz.targets import ORACLE, Target, all_targets, host_leaves, scope
from ember.fuzz.variants import VARIANTS, Variant, make_variant, widened, widened_to_double


@dataclass(frozen=True)
class Failure:
    program: Program
    variant: str
    target: str
    kind: str  # 'mismatch', 'error' or 'crash'
    detail: str
    error_type: str = ""

    def signature(self) -> tuple[str, str, str, str]:
        """What must stay the same while shrinking: where and how it fails."""
        return self.variant, self.target, self.kind, self.error_type

    def headline(self) -> str:
        return f"{self.kind} in {self.variant} on {self.target}: {self.detail.splitlines()[0]}"


@dataclass
class Report:
    failures: list[Failure] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (variant, reason)
    runs: int = 0


def _describe(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (raised at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def evaluate(code: str, variant_scope: dict, args: Sequence[Any]) -> list:
    """Run a target's ``code`` with a variant's names and ``args``; the result's arrays."""
    env = {**scope(), **variant_scope, "args": list(args)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return host_leaves(eval(code, env))


def half_precision_rtol(program: Program) -> float:
    """The tolerance of the narrowest float dtype ``program`` computes in."""
    return max((rtol_for(aval.dtype) for aval in program.avals().values()
                if dtypes.is_floating(aval.dtype)), default=0.0)


def float32_expectation(variant: Variant, expected: Sequence[np.ndarray]) -> list | None:
    """The oracle's result with float16 / bfloat16 computed in float32, rounded to the
    expected dtypes (None when the variant has no half precision). Where the exact
    result (computed in float64) overflows the expected dtype and float32 adds nothing
    to the reference's answer, NaN is the alternative: partial sums taken in another
    order may overflow to opposite infinities. Only a reference result that is not
    finite asks for the float64 computation that tells where."""
    wide = widened(variant)
    if wide is None:
        return None
    try:
        found = evaluate(ORACLE.code, compile_source(wide.source), wide.args)
    except EmberError:
        return None
    with np.errstate(over="ignore"):
        found = [np.asarray(f).astype(e.dtype) for f, e in zip(found, expected)]
    if all(np.isfinite(e).all() for e in expected if dtypes.is_floating(e.dtype)):
        return found  # (an overflow shows as an infinity or NaN the reference gave)
    for result, e, overflows in zip(found, expected, _overflows(variant, expected)):
        if overflows.any():  # (only float outputs overflow)
            # where float32 gives the reference's answer, NaN takes its place; where it
            # differs, it stays the alternative
            with np.errstate(invalid="ignore"):
                same = (result == e) | (np.isnan(result) & np.isnan(e))
            result[overflows & same] = np.nan
    return found


def _overflows(variant: Variant, expected: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per output, where the float64 computation of ``variant`` is beyond the expected
    dtype's finite range (nowhere, when it cannot be computed in float64)."""
    nowhere = [np.zeros(np.shape(e), bool) for e in expected]
    try:
        double = widened_to_double(variant)
        with enable_x64():
            exact = evaluate(ORACLE.code, compile_source(double.source), double.args)
    except Exception:  # noqa: BLE001 - a program that needs its narrow dtypes: no hint
        return nowhere
    return [_beyond(np.asarray(x, np.float64), float(ml_dtypes.finfo(e.dtype).max))
            if dtypes.is_floating(e.dtype) and np.shape(x) == np.shape(e) else n
            for x, e, n in zip(exact, expected, nowhere)]


def _beyond(exact: np.ndarray, largest: float) -> np.ndarray:
    """Where a result is too large for the dtype. Infinite ones too: an opposite
    infinity from a term that overflows may join them in another order."""
    with np.errstate(invalid="ignore"):
        return ~np.isnan(exact) & (np.abs(exact) > largest)


def run_variant(program: Program, variant: Variant, targets: Sequence[Target],
                report: Report) -> None:
    variant_scope = compile_source(variant.source)
    try:
        expected = evaluate(ORACLE.code, variant_scope, variant.args)
    except EmberError as error:
        report.rejected.append((variant.name, str(error).splitlines()[0]))
        return
    except Exception as error:  # noqa: BLE001 - a crash of the oracle is a finding
        report.failures.append(Failure(program, variant.name, ORACLE.name, "crash",
                                       _describe(error), type(error).__name__))
        return
    also, min_rtol = None, 0.0
    if not all(t.rounds_every_op for t in targets):
        also = float32_expectation(variant, expected)
        min_rtol = half_precision_rtol(program)
    for target in targets:
        report.runs += 1
        try:
            actual = evaluate(target.code, variant_scope, variant.args)
        except Exception as error:  # noqa: BLE001 - every escape is a finding
            kind = "error" if isinstance(error, EmberError) else "crash"
            report.failures.append(Failure(program, variant.name, target.name, kind,
                                           _describe(error), type(error).__name__))
            continue
        found = (differences(actual, expected) if target.rounds_every_op
                 else differences(actual, expected, also, min_rtol))
        if found is not None:
            report.failures.append(Failure(program, variant.name, target.name, "mismatch", found))


def check(program: Program, variants: Sequence[str] = VARIANTS,
          targets: Sequence[Target] | None = None, report: Report | None = None) -> Report:
    """Run ``program``'s variants on ``targets`` (default: all) against the oracle."""
    report = report if report is not None else Report()
    targets = all_targets() if targets is None else targets
    for name in variants:
        variant = make_variant(program, name)
        if variant is not None:
            run_variant(program, variant, targets, report)
    return report


def reproduce(program: Program, failure: Failure) -> Failure | None:
    """How ``program`` fails the way ``failure`` did (same variant, target, kind and
    error type), or None if it does not."""
    targets = [t for t in all_targets() if t.name == failure.target]
    report = check(program, [failure.variant], targets)
    return next((f for f in report.failures if f.signature() == failure.signature()), None)
