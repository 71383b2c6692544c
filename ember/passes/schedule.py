"""The schedule: what fusion hands to code generation.

A schedule is the program as an ordered list of groups. Each group becomes one kernel,
one library call (GEMM, with its fused epilogue) or one host call:

- ``loop`` group: a loop nest over ``domain`` computing its member equations and
  storing its ``roots``. With reductions inside, the first ``outer_rank`` domain axes are
  iterated outside the reduction loops (a row-wise kernel: softmax, layernorm).
- ``library`` group: the ``library`` equation (dot_general) run by BLAS, then its
  epilogue members as a loop over the GEMM output.
- ``host`` group: one equation without a native lowering, run by its NumPy reference.

Values read by a group and computed outside it live in buffers (graph inputs,
constants, or roots of earlier groups).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ember.codegen.gemm import Matrix
from ember.codegen.indexing import Index, Sym
from ember.ir.graph import Eqn, Graph, Var


@dataclass(eq=False)
class Group:
    id: int
    kind: str  # 'loop' | 'library' | 'host' | 'call' (native code of its own, see FusionPolicy)
    domain: tuple[int, ...] = ()
    syms: tuple[Sym, ...] = ()
    outer_rank: int | None = None
    roots: list[Var] = field(default_factory=list)
    root_index: dict[Var, Index] = field(default_factory=dict)
    members: dict[int, Eqn] = field(default_factory=dict)  # id(eqn) -> eqn (Eqn is unhashable)
    library: Eqn | None = None
    library_operands: list[tuple[Var, Index, tuple[Sym, ...]]] = field(default_factory=list)
    host: Eqn | None = None  # the equation of a 'host' or 'call' group
    # (host) operand position -> the stored value read in that operand's place: the
    # operand is a row-major reshape of it, which the host call reads as a view
    host_reads: dict[int, Var] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)  # why its results are not fused further
    # (library) the product goes straight into ``roots[0]``, laid out as the member views
    # (a transpose, a reshape) would copy it there: where in that buffer. No epilogue.
    product_layout: Matrix | None = None

    @property
    def name(self) -> str:
        prefix = {"loop": "fusion", "library": "gemm", "host": "host", "call": "call"}[self.kind]
        return f"{prefix}_{self.id}"

    @property
    def product(self) -> Var:
        """The buffer a library group's call writes its product to."""
        return self.roots[0] if self.product_layout is not None else self.library.outputs[0]

    def add_root(self, var: Var, index: Index, reason: str) -> None:
        if var not in self.root_index:
            self.roots.append(var)
            self.root_index[var] = index
        if reason and reason not in self.reasons:
            self.reasons.append(reason)

    def add_member(self, eqn: Eqn) -> None:
        self.members[id(eqn)] = eqn

    def has_member(self, eqn: Eqn) -> bool:
        return id(eqn) in self.members

    def equations(self, graph_order: dict[int, int]) -> list[Eqn]:
        """Every equation this group computes, in graph order (``graph_order``: by id)."""
        eqns = list(self.members.values())
        for extra in (self.library, self.host):
            if extra is not None:
                eqns.append(extra)
        return sorted(eqns, key=lambda e: graph_order[id(e)])

    def member_outputs(self) -> set[Var]:
        return {v for eqn in self.members.values() for v in eqn.outputs}

    def reads(self) -> list[Var]:
        """Values this group loads from buffers, in first-use order."""
        computed = self.member_outputs()
        seen: dict[Var, None] = {}
        for eqn in self.members.values():
            for atom in eqn.inputs:
                if isinstance(atom, Var) and atom not in computed:
                    seen.setdefault(atom)
        if self.host is not None:
            for position, atom in enumerate(self.host.inputs):
                atom = self.host_reads.get(position, atom)
                if isinstance(atom, Var):
                    seen.setdefault(atom)
        for base, _, _ in self.library_operands:
            seen.setdefault(base)
        if self.library is not None:
            seen.pop(self.library.outputs[0], None)
        return list(seen)

    def writes(self) -> list[Var]:
        if self.host is not None:
            return list(self.host.outputs)
        out = list(self.roots)
        if (self.library is not None and self.product_layout is None
                and self.library.outputs[0] not in self.root_index):
            out.insert(0, self.library.outputs[0])
        return out

    def why_boundary(self) -> str:
        return "; ".join(self.reasons)


@dataclass
class Schedule:
    graph: Graph
    groups: list[Group]

    def text(self, names: Callable[[Var], str] | None = None) -> str:
        """Readable listing of the fused groups (``compiled.as_text()`` shows it)."""
        name = names or (lambda v: f"%{id(v) % 10000}")
        order = {id(eqn): i for i, eqn in enumerate(self.graph.eqns)}
        lines = [f"schedule: {len(self.groups)} steps"]
        for group in self.groups:
            ops = ", ".join(e.prim.name for e in group.equations(order))
            writes = ", ".join(f"{name(v)}:{v.aval.str_short()}" for v in group.writes())
            reads = ", ".join(name(v) for v in group.reads()) or "-"
            lines.append(f"  {group.name} [{group.kind}] {writes} <- {reads}")
            lines.append(f"      ops: {ops}")
            if group.kind == "loop" and group.outer_rank is not None:
                lines.append(f"      row-wise over the first {group.outer_rank} of axes "
                             f"{group.domain}")
            if group.reasons:
                lines.append(f"      boundary: {group.why_boundary()}")
        return "\n".join(lines)
