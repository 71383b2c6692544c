"""Where the program generator gets its decisions from.

The generator asks one question, ``integer(lo, hi)``, and builds everything else from
the answers. Three sources answer it:

- ``RandomChoices``: a seeded random stream that records its answers (``ember fuzz``);
- ``ReplayChoices``: replays a recorded (and possibly edited) list of answers, which is
  how the shrinker explores smaller programs;
- ``HypothesisChoices``: draws from hypothesis, which then shrinks failures itself.

Answers are stored as offsets from ``lo``, so 0 is always the simplest option: the
generator lists its options simplest first, and shrinking towards 0 simplifies.
"""
from __future__ import annotations

import random
from typing import Any, Protocol, Sequence, TypeVar

T = TypeVar("T")


class Choices(Protocol):
    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (both inclusive; ``lo <= hi``)."""


class RandomChoices:
    """Seeded random answers; ``recorded`` keeps them (as offsets) for replay."""

    def __init__(self, seed: int | str) -> None:
        self._random = random.Random(seed)
        self.recorded: list[int] = []

    def integer(self, lo: int, hi: int) -> int:
        offset = self._random.randint(0, hi - lo)
        self.recorded.append(offset)
        return lo + offset


class ReplayChoices:
    """Answers from a list of offsets: clamped into range, ``lo`` once the list runs out."""

    def __init__(self, offsets: Sequence[int]) -> None:
        self._offsets = list(offsets)
        self._next = 0
        self.recorded: list[int] = []

    def integer(self, lo: int, hi: int) -> int:
        offset = self._offsets[self._next] if self._next < len(self._offsets) else 0
        self._next += 1
        offset = min(max(offset, 0), hi - lo)
        self.recorded.append(offset)
        return lo + offset


class HypothesisChoices:
    """Answers drawn from a hypothesis ``data`` object (``st.data()``)."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies

        self._data = data
        self._integers = strategies.integers

    def integer(self, lo: int, hi: int) -> int:
        return self._data.draw(self._integers(lo, hi))


def pick(choices: Choices, options: Sequence[T]) -> T:
    """One of ``options`` (the first is the simplest)."""
    if not options:
        raise ValueError("pick from no options")
    return options[choices.integer(0, len(options) - 1)]


def chance(choices: Choices, percent: int) -> bool:
    """True with probability ``percent``/100 for random answers; False is the simple answer."""
    return choices.integer(0, 99) >= 100 - percent


def subset(choices: Choices, items: Sequence[T]) -> list[T]:
    """A sub-list of ``items`` (order kept)."""
    return [item for item in items if chance(choices, 50)]


def permutation(choices: Choices, n: int) -> list[int]:
    """A permutation of ``range(n)`` (all-zero answers give the identity)."""
    remaining = list(range(n))
    return [remaining.pop(choices.integer(0, len(remaining) - 1)) for _ in range(n)]
