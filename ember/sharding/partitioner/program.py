"""The partitioner's product: the per-device program, and what it communicates."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ember.core.source_info import SourceInfo
from ember.ir.graph import Graph
from ember.ops.sharding_rules import Dims
from ember.sharding.partition_spec import PartitionSpec

__all__ = ["Collective", "SpmdProgram", "describe", "spec_of"]


def spec_of(dims: Dims) -> PartitionSpec:
    """The PartitionSpec of a split (trailing whole dimensions left out)."""
    entries = [tuple(axes) if axes else None for axes in dims]
    while entries and entries[-1] is None:
        entries.pop()
    return PartitionSpec(*entries)


def describe(dims: Dims) -> str:
    return repr(PartitionSpec(*[tuple(axes) if axes else None for axes in dims]))


@dataclass(frozen=True)
class Collective:
    """One collective the partitioner inserted."""

    kind: str  # "all-reduce", "reduce-scatter", "all-gather" or "all-to-all"
    axis: str  # the mesh axis it runs over
    values: int  # how many values it carries (combined all-reduces carry several)
    shape: tuple[int, ...]  # the per-device operand (all-gather: result) it moves
    dtype: str
    bytes_per_device: float  # sent by each device (ring algorithms)
    source: SourceInfo | None  # the user's line of the operation that needed it
    reason: str  # the conflict of splits that caused it

    def __str__(self) -> str:
        where = str(self.source) if self.source else "(no source line)"
        shape = ",".join(map(str, self.shape))
        return (f"{self.kind} over {self.axis!r} of {self.dtype}[{shape}] "
                f"({self.bytes_per_device:.0f} bytes per device) at {where}: {self.reason}")


@dataclass
class SpmdProgram:
    """``graph`` runs on every device of ``mesh`` at shard shapes; its inputs and
    outputs are split as ``in_dims`` / ``out_dims`` say."""

    graph: Graph
    in_dims: list[Dims]
    out_dims: list[Dims]
    collectives: list[Collective]
    mesh: Mapping[str, int]

    @property
    def in_specs(self) -> list[PartitionSpec]:
        return [spec_of(d) for d in self.in_dims]

    @property
    def out_specs(self) -> list[PartitionSpec]:
        return [spec_of(d) for d in self.out_dims]

    def bytes_communicated(self) -> float:
        """Bytes each device sends per call."""
        return sum(c.bytes_per_device for c in self.collectives)

    def explain(self) -> str:
        """Every inserted collective, with the user's line and its cause."""
        if not self.collectives:
            return "collectives: none"
        return "\n".join(["collectives:"] + [f"  {c}" for c in self.collectives])

    def as_text(self, source: bool = True) -> str:
        mesh = ", ".join(f"{a!r}: {n}" for a, n in self.mesh.items())
        specs = ", ".join(map(repr, self.in_specs))
        outs = ", ".join(map(repr, self.out_specs))
        return (f"# SPMD program per device of mesh ({mesh}); inputs {specs}; "
                f"outputs {outs}\n{self.graph.pretty_print(source=source)}\n"
                f"{self.explain()}")
