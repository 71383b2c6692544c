"""What ``compiled.profile()`` returns: the calls and time of every kernel of a compiled
program, printable as a table with the costliest kernels first."""
from __future__ import annotations

from dataclasses import dataclass

from ember.backends.base import KernelInfo


@dataclass(frozen=True)
class ProfileRow:
    kernel: KernelInfo
    calls: int
    seconds: float

    @property
    def mean_seconds(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0


class Profile(list):
    """One ``ProfileRow`` per kernel, in program order."""

    @property
    def total_seconds(self) -> float:
        return sum(row.seconds for row in self)

    def __str__(self) -> str:
        total = self.total_seconds
        lines = [f"{'kernel':<24} {'kind':<8} {'calls':>7} {'total ms':>10} {'mean us':>10} "
                 f"{'share':>6}  source"]
        # (a "view" step runs no code: its value was written into the output's memory)
        timed = [row for row in self if row.kernel.kind != "view"]
        for row in sorted(timed, key=lambda r: r.seconds, reverse=True):
            share = row.seconds / total if total else 0.0
            source = ", ".join(row.kernel.source_lines[:2])
            lines.append(f"{row.kernel.name:<24} {row.kernel.kind:<8} {row.calls:>7} "
                         f"{row.seconds * 1e3:>10.3f} {row.mean_seconds * 1e6:>10.1f} "
                         f"{share:>6.1%}  {source}")
        lines.append(f"{'total':<24} {'':<8} {'':>7} {total * 1e3:>10.3f}")
        if len(timed) < len(self):
            lines.append(f"(and {len(self) - len(timed)} view step(s), which run no code: "
                         "reshaped outputs computed in place)")
        return "\n".join(lines)
