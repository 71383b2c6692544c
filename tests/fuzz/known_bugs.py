"""Bugs the fuzzer has found that are not fixed yet, each pinned by a strict-xfail test
in ``test_regressions.py``. The bounded fuzz runs report a failure matching one of
these as known instead of failing; every other failure fails them. When a bug is fixed,
its regression test passes, strict xfail turns that into a failure, and the entry here
goes together with the xfail mark."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ember.fuzz.program import function_source
from ember.fuzz.runner import Failure


@dataclass(frozen=True)
class KnownBug:
    test: str  # the regression test in test_regressions.py
    matches: Callable[[Failure], bool]


def _source(failure: Failure) -> str:
    return function_source(failure.program)


KNOWN_BUGS: tuple[KnownBug, ...] = ()


def new_failures(failures: Sequence[Failure]) -> list[Failure]:
    """The failures no known bug explains."""
    return [f for f in failures if not any(bug.matches(f) for bug in KNOWN_BUGS)]


def describe(failures: Sequence[Failure]) -> str:
    return "\n\n".join(f"{f.headline()}\n{f.detail}\n{function_source(f.program)}"
                       for f in failures)
