"""Buffer assignment: where every materialized value of a schedule lives.

Liveness-based: temporaries share one arena, a block being reused as soon as the value
in it is dead (best fit, 64-byte aligned). A kernel whose output has the same size as
an input that dies in it, and that reads that input only at the position it writes,
updates it in place. Program outputs get their own memory (they are returned), unless
the caller donated an input of the same type that is dead by then: the output is
written over the donated buffer. An output that is only a reshape of a value computed
by the program (a step that would copy it) is that value's buffer: the value is written
into the output's memory and the step has nothing left to do (``BufferPlan.views``).
Results of host calls live in NumPy arrays.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ember.ir.graph import Var
from ember.passes.analysis import last_uses

ALIGNMENT = 64


@dataclass(frozen=True)
class Location:
    kind: str  # 'input' (argument or constant), 'output', 'arena', 'host'
    slot: int = 0  # index among inputs / outputs / host values
    offset: int = 0  # byte offset in the arena


@dataclass
class Step:
    """What one scheduled group does to buffers. ``inplace`` lists (output, input) pairs
    the kernel could safely share; ``view_of``: the value whose bytes the one output is,
    in the same order (a reshape), if that is all the step computes."""

    reads: list[Var]
    writes: list[Var]
    host: bool = False
    inplace: list[tuple[Var, Var]] = field(default_factory=list)
    view_of: Var | None = None


@dataclass
class BufferPlan:
    locations: dict[Var, Location]
    arena_bytes: int
    in_place: list[tuple[Var, Var]]  # (value, the dead value whose buffer it took)
    donated_outputs: int
    views: set[Var] = field(default_factory=set)  # outputs already in place: no copy


class _Arena:
    def __init__(self) -> None:
        self.free: list[tuple[int, int]] = []  # (offset, size), sorted by offset
        self.top = 0

    def allocate(self, nbytes: int) -> int:
        size = _aligned(nbytes)
        fits = [(s, o) for o, s in self.free if s >= size]
        if fits:
            block_size, offset = min(fits)
            self.free.remove((offset, block_size))
            if block_size > size:
                self._insert(offset + size, block_size - size)
            return offset
        offset = self.top
        self.top += size
        return offset

    def release(self, offset: int, nbytes: int) -> None:
        self._insert(offset, _aligned(nbytes))

    def _insert(self, offset: int, size: int) -> None:
        blocks = sorted([*self.free, (offset, size)])
        merged: list[tuple[int, int]] = []
        for o, s in blocks:
            if merged and merged[-1][0] + merged[-1][1] == o:
                merged[-1] = (merged[-1][0], merged[-1][1] + s)
            else:
                merged.append((o, s))
        if merged and merged[-1][0] + merged[-1][1] == self.top:
            self.top = merged.pop()[0]
        self.free = merged


def _aligned(nbytes: int) -> int:
    return max(ALIGNMENT, (nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT)


def plan_buffers(steps: Sequence[Step], inputs: Sequence[Var], donated: Sequence[bool],
                 outputs: Sequence[Var]) -> BufferPlan:
    """Assign a location to every value the steps read or write.

    ``inputs`` are the program's arguments then its constants (``donated`` flags the
    arguments the caller gives up); ``outputs`` the distinct program results.
    """
    locations = {v: Location("input", i) for i, v in enumerate(inputs)}
    output_slot = {v: i for i, v in enumerate(outputs)}
    last_use = _last_uses(steps, outputs)
    arena = _Arena()
    owner: dict[Var, int] = {}  # arena value -> its block offset
    reusable_inputs = [v for v, d in zip(inputs, donated) if d and v not in output_slot]
    in_place: list[tuple[Var, Var]] = []
    donated_outputs = 0
    host_slots = 0
    into_output = _written_into_outputs(steps, output_slot, locations)
    views: set[Var] = set()
    for index, step in enumerate(steps):
        fresh: set[Var] = set()  # written here into memory that held nothing live
        for var in _placement_order(step, last_use, index):
            if var in locations:
                continue
            if var in into_output:
                locations[var] = Location("output", output_slot[into_output[var]])
                fresh.add(var)
                continue
            if step.view_of is not None and into_output.get(step.view_of) is var:
                locations[var] = locations[step.view_of]
                views.add(var)
                continue
            shared = _sibling_target(var, step, fresh) if last_use.get(var) == index else None
            if shared is not None:  # a temporary of this step, updated in place by it
                locations[var] = locations[shared]
                fresh.discard(shared)
                in_place.append((shared, var))
                continue
            partner = _in_place_partner(var, index, step, locations, last_use, owner,
                                        reusable_inputs)
            if var in output_slot:
                donor = partner if partner in reusable_inputs else _dead_donation(
                    var, index, reusable_inputs, last_use)
                if donor is not None:
                    reusable_inputs.remove(donor)
                    locations[var] = locations[donor]
                    in_place.append((var, donor))
                    donated_outputs += 1
                else:
                    locations[var] = Location("output", output_slot[var])
                    fresh.add(var)
            elif step.host:
                locations[var] = Location("host", host_slots)
                host_slots += 1
            elif partner is not None:
                locations[var] = locations[partner]
                in_place.append((var, partner))
                if partner in owner:
                    owner[var] = owner.pop(partner)
                else:
                    reusable_inputs.remove(partner)
            else:
                offset = arena.allocate(var.aval.nbytes)
                owner[var] = offset
                locations[var] = Location("arena", 0, offset)
                fresh.add(var)
        for var in [v for v in owner if last_use.get(v, index) <= index]:
            arena.release(owner.pop(var), var.aval.nbytes)
    return BufferPlan(locations, _high_water(locations), in_place, donated_outputs, views)


def _written_into_outputs(steps: Sequence[Step], output_slot: dict[Var, int],
                          inputs: dict[Var, Location]) -> dict[Var, Var]:
    """Values to write straight into the memory of a program output that is only their
    reshape: computed by a kernel (not arguments or constants, not NumPy arrays of host
    calls) and not outputs themselves (each output keeps a buffer of its own)."""
    computed = {v for step in steps if not step.host for v in step.writes}
    into: dict[Var, Var] = {}
    for step in steps:
        source = step.view_of
        if (source is None or len(step.writes) != 1 or step.writes[0] not in output_slot
                or source in output_slot or source in inputs or source not in computed
                or source in into):
            continue
        into[source] = step.writes[0]
    return into


def _placement_order(step: Step, last_use: dict[Var, int], index: int) -> list[Var]:
    """Writes in placement order: a value that only lives inside this step (a GEMM result
    its epilogue updates in place) comes after the value that takes over its buffer."""
    internal = {source for out, source in step.inplace
                if source in step.writes and last_use.get(source) == index}
    return [v for v in step.writes if v not in internal] + [v for v in step.writes
                                                           if v in internal]


def _sibling_target(var: Var, step: Step, fresh: set[Var]) -> Var | None:
    """A value written by this step into fresh memory that may also hold ``var`` first."""
    for out, source in step.inplace:
        if source is var and out in fresh and \
                out.aval.nbytes == var.aval.nbytes and out.aval.dtype == var.aval.dtype:
            return out
    return None


def _high_water(locations: dict[Var, Location]) -> int:
    ends = [loc.offset + _aligned(v.aval.nbytes) for v, loc in locations.items()
            if loc.kind == "arena"]
    return max(ends, default=0)


def _last_uses(steps: Sequence[Step], outputs: Sequence[Var]) -> dict[Var, int]:
    """The last step touching each value (the program's outputs: past the last step)."""
    return {**last_uses(steps), **dict.fromkeys(outputs, len(steps))}


def _in_place_partner(var: Var, index: int, step: Step, locations: dict[Var, Location],
                      last_use: dict[Var, int], owner: dict[Var, int],
                      reusable_inputs: list[Var]) -> Var | None:
    """An input of this step that dies here and whose buffer ``var`` can take."""
    for out, source in step.inplace:
        if out is not var or last_use.get(source) != index:
            continue
        if source.aval.nbytes != var.aval.nbytes or source.aval.dtype != var.aval.dtype:
            continue
        if source in owner or source in reusable_inputs:
            return source
    return None


def _dead_donation(var: Var, index: int, donors: list[Var],
                   last_use: dict[Var, int]) -> Var | None:
    """A donated argument of the same type that no step after this one reads."""
    for donor in donors:
        if (donor.aval.shape == var.aval.shape and donor.aval.dtype == var.aval.dtype
                and last_use.get(donor, -1) < index):
            return donor
    return None
