"""Operator fusion: decide which values live in buffers and which kernel computes the rest.

Walking the graph from its outputs back to its inputs, every value is either *inlined*
into the kernels that consume it (computed where and when it is needed, at the index
each consumer reads it through) or *materialized* as a root of its own kernel. Because
consumers are placed before their producers, each decision sees every place a value is
needed, as exact index expressions (``ember.codegen.access``):

- elementwise, view and iota producers are inlined; a value needed by several kernels
  is recomputed in each when it is cheap, stored once when it is expensive;
- a reduction is inlined into a consumer that needs it once per iteration of the
  consumer's leading axes (softmax, layernorm: a row-wise kernel), never recomputed;
- a value that must be in a buffer anyway (a program output) is stored by the kernel
  that consumes it, when that kernel visits each of its elements once (multi-output);
- dot_general runs as a library call (BLAS); the elementwise kernel that consumes its
  whole result becomes its epilogue; transposes of its operands become BLAS flags; a
  consumer that only copies the whole result through views (a transpose, a reshape)
  becomes the layout the call writes it in;
- gather, the dynamic slices and scatters whose updates land apart are inlined like
  elementwise equations (a load at a data-dependent position: the array they index is
  stored, their indices computed in place); other scatters and scans are stored by a
  kernel of their own, which computes their operands in place
  (``ember.codegen.access.is_ordered``);
- equations without a native lowering run on the host; their operands are stored (an
  operand that is a reshape read by that call alone is read, where the target can, as
  a view of what it reshapes: ``FusionPolicy.host_reads_reshapes``).

Kernels of the same shape that read a common input are then merged (sibling fusion),
as are a GEMM epilogue that stores a transcendental and the elementwise kernels that read
its results element by element; unused values are never computed. Every boundary records why it exists.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember.codegen import access, indexing as ix
from ember.codegen.gemm import operand_matrix, operand_syms, product_matrix, view_strides
from ember.codegen.indexing import Index, Sym
from ember.ir.graph import Eqn, Graph, Literal, Var, has_effects, subgraphs, uses
from ember.ops.elementwise import ELEMENTWISE
from ember.ops.structural import broadcast_in_dim_p
from ember.passes.rewrite import new_eqn
from ember.passes.schedule import Group, Schedule

MAX_DUPLICATES = 4  # a cheap value is recomputed in at most this many kernels


@dataclass(frozen=True)
class FusionPolicy:
    """What the target can do: ``native(eqn)`` is True when the eqn can be computed in a
    generated kernel; ``library(eqn)`` when it runs as a library call (GEMM); ``call(eqn)``
    when the target runs it as native code of its own that fuses with nothing (the CPU's
    sort): placed like a host call, but not on the host."""

    native: Callable[[Eqn], bool]
    library: Callable[[Eqn], bool] = lambda eqn: False
    call: Callable[[Eqn], bool] = lambda eqn: False
    # The library GEMM reads a float32 operand of a 16-bit product and rounds it as it
    # packs it (``x.astype(bfloat16) @ w``: the cast is never stored).
    casts_operands: bool = False
    # A host call reads an operand that only it uses and that is a reshape of a stored
    # value as a view of that value (``Group.host_reads``): the reshape is never stored.
    host_reads_reshapes: bool = False


def schedule_groups(graph: Graph, policy: FusionPolicy) -> Schedule:
    """Group the equations of ``graph`` into kernels, library calls and host calls."""
    return _Fuser(graph, policy).run()


# --- contractions absorb the sums and transposes of their results ----------------------

def absorb_into_contractions(graph: Graph, policy: FusionPolicy) -> Graph:
    """Let a library dot_general compute what its only consumer wants:

    - ``reduce_sum`` over batch axes of the product: those axes become contracting axes
      (a weight gradient summed over a batch is one GEMM, not a batch of GEMMs and a sum);
    - ``transpose`` swapping the two free blocks: swap the operands (C^T = B^T A^T);

    and a scalar multiple of an operand read by the product alone becomes a multiple of
    the product (``_scale_after_product``): the GEMM's alpha, with no kernel scaling it.
    """
    reads = uses(graph)  # (being an output counts as a read: outputs stay apart)
    consumers: dict[Var, list[Eqn]] = {}
    for eqn in graph.eqns:
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                consumers.setdefault(atom, []).append(eqn)
    producer: dict[Var, Eqn] = {}
    eqns: list[Eqn] = []
    changed = False
    for eqn in graph.eqns:
        moved = _scale_after_product(eqn, producer, reads, consumers) if policy.library(eqn) \
            else None
        if moved is not None and policy.library(moved[0]):
            eqns += moved
            producer.update((v, e) for e in moved for v in e.outputs)
            changed = True
            continue
        operand = eqn.inputs[0] if eqn.inputs else None
        dot = producer.get(operand) if isinstance(operand, Var) else None
        if dot is not None and dot.prim.name == "dot_general" and reads.get(operand) == 1 \
                and policy.library(dot):
            new = _absorbed(dot, eqn)
            if new is not None and policy.library(new):
                eqns.remove(dot)
                eqn, changed = new, True
        eqns.append(eqn)
        producer.update((v, eqn) for v in eqn.outputs)
    return graph.replace(eqns=eqns) if changed else graph


def _scale_after_product(dot: Eqn, producer: dict[Var, Eqn], reads: dict,
                         consumers: dict[Var, list[Eqn]]) -> list[Eqn] | None:
    """``(c * x) @ w`` as ``c * (x @ w)`` (c a scalar literal, broadcast; ``c * x`` read
    by the product alone): the equations replacing ``dot``, or None. Not where a
    consumer would absorb the product itself (a sum over its batch, a transpose) or
    where the operands are narrower than the product (the scale would change type)."""
    out = dot.outputs[0]
    if dot.inputs[0].aval.dtype != out.aval.dtype or any(
            c.prim.name in ("reduce_sum", "transpose", "dot_general")
            for c in consumers.get(out, ())):
        return None
    inputs, factors = list(dot.inputs), []
    for position, operand in enumerate(dot.inputs):
        scaled = producer.get(operand) if isinstance(operand, Var) else None
        if scaled is None or scaled.prim.name != "mul" or reads.get(operand) != 1:
            continue
        for x, factor in (scaled.inputs, scaled.inputs[::-1]):
            broadcast = producer.get(factor) if isinstance(factor, Var) else None
            if (isinstance(x, Var) and broadcast is not None
                    and broadcast.prim.name == "broadcast_in_dim"
                    and isinstance(broadcast.inputs[0], Literal)
                    and broadcast.inputs[0].aval.shape == ()):
                inputs[position] = x
                factors.append(broadcast.inputs[0])
                break
    if not factors:
        return None
    product = Var(out.aval)
    eqns = [dot.replace(inputs=inputs, outputs=[product])]
    for index, factor in enumerate(factors):  # (one mul per factor: the last writes out)
        scale = new_eqn(broadcast_in_dim_p, [factor],
                        {"shape": out.aval.shape, "broadcast_dimensions": ()}, dot.source)
        result = out if index == len(factors) - 1 else Var(out.aval)
        eqns += [scale, Eqn(ELEMENTWISE["mul"], [product, scale.outputs[0]], [result], {},
                            dot.source)]
        product = result
    return eqns


def _absorbed(dot: Eqn, consumer: Eqn) -> Eqn | None:
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    name = consumer.prim.name
    if name == "reduce_sum" and set(consumer.params["axes"]) <= set(range(len(lb))):
        axes = set(consumer.params["axes"])
        # (batch axes are usually outermost: contracting them first keeps operands
        # readable as one strided axis)
        dims = ((tuple(lb[a] for a in sorted(axes)) + tuple(lc),
                 tuple(rb[a] for a in sorted(axes)) + tuple(rc)),
                (tuple(d for a, d in enumerate(lb) if a not in axes),
                 tuple(d for a, d in enumerate(rb) if a not in axes)))
        return dot.replace(params={**dot.params, "dimension_numbers": dims},
                           outputs=consumer.outputs)
    if name == "transpose":
        lhs, rhs = dot.inputs[0].aval, dot.inputs[1].aval
        nb = len(lb)
        n_lhs = lhs.ndim - len(lc) - nb
        n_rhs = rhs.ndim - len(rc) - nb
        swapped = (*range(nb), *range(nb + n_lhs, nb + n_lhs + n_rhs), *range(nb, nb + n_lhs))
        if tuple(consumer.params["permutation"]) != swapped:
            return None
        dims = ((tuple(rc), tuple(lc)), (tuple(rb), tuple(lb)))
        return dot.replace(inputs=[dot.inputs[1], dot.inputs[0]],
                           params={**dot.params, "dimension_numbers": dims},
                           outputs=consumer.outputs)
    return None


def domain_syms(shape: tuple[int, ...]) -> tuple[Sym, ...]:
    return tuple(Sym(f"d{k}", n) for k, n in enumerate(shape))


class _Fuser:
    def __init__(self, graph: Graph, policy: FusionPolicy) -> None:
        self.graph = graph
        self.policy = policy
        self.producer = {v: eqn for eqn in graph.eqns for v in eqn.outputs}
        self.demands: dict[Var, dict[Group, set[Index]]] = {}
        self.needs: dict[Var, str] = {}
        # Buffers read by calls or guarded loads: never stored by their consumer kernel.
        self.loaded_by_calls: set[Var] = set()
        self.groups: list[Group] = []
        self.ordered_groups: set[Group] = set()  # kernels of scatters and scans
        self.uses = uses(graph)
        for atom in graph.outputs:
            self.need(atom, "program output")

    def run(self) -> Schedule:
        for eqn in reversed(self.graph.eqns):
            if not any(v in self.needs or self.demands.get(v) for v in eqn.outputs) \
                    and not has_effects(eqn):
                continue  # dead: nothing reads it
            kind = self.kind(eqn)
            if kind == "host":
                self.place_host(eqn)
            elif kind == "ordered":
                self.place_ordered(eqn)
            elif kind == "library":
                self.place_library(eqn)
            else:
                self.place_value(eqn, kind)
        groups = self._merge_into_epilogues(_merge_siblings(list(reversed(self.groups))))
        return Schedule(self.graph, _topological(groups))

    def _merge_into_epilogues(self, groups: list[Group]) -> list[Group]:
        """Let a GEMM epilogue that stores a transcendental (``tanh`` of GELU, kept for
        the backward) also compute the elementwise kernels that read it, or the product,
        element by element: such an epilogue never folds into the call (no affine
        function or activation ends in one), so it is a loop over the product anyway,
        and its consumer, merged, reads neither buffer back (multi-output)."""
        for library in [g for g in groups if g.kind == "library"]:
            if library.product_layout is not None or not any(
                    access.is_expensive(self.producer[root].prim.name)
                    for root in library.roots if root is not library.library.outputs[0]):
                continue
            written = set(library.writes())
            identity = ix.identity(library.syms)
            for consumer in [g for g in groups if g.kind == "loop"]:
                read = written.intersection(consumer.reads())
                if (not read or consumer.domain != library.domain
                        or consumer.outer_rank is not None or consumer in self.ordered_groups
                        or any(self.demands.get(v, {}).get(consumer) != {identity}
                               for v in read)):
                    continue
                others = [g for g in groups if g is not library and g is not consumer]
                deps = _producers(groups)
                if any(_reaches(consumer, g, deps) and _reaches(g, library, deps)
                       for g in others):
                    continue  # (through another kernel: it must run in between)
                _absorb(library, consumer)
                groups.remove(consumer)
                written.update(library.writes())
        return groups

    # --- classification -------------------------------------------------------------
    def kind(self, eqn: Eqn) -> str:
        if self.policy.library(eqn):
            return "library"
        if len(eqn.outputs) != 1 or not self.policy.native(eqn):
            return "host"
        if access.is_view(eqn):
            return "view"
        if access.is_reduction(eqn):
            return "reduction"
        if access.is_ordered(eqn):
            return "ordered"
        return "elementwise"

    def need(self, var, reason: str) -> None:
        if isinstance(var, Var):
            self.needs.setdefault(var, reason)

    def new_group(self, kind: str, shape: tuple[int, ...] = ()) -> Group:
        group = Group(id=len(self.groups), kind=kind, domain=shape, syms=domain_syms(shape))
        self.groups.append(group)
        return group

    # --- host and library calls -----------------------------------------------------
    def place_host(self, eqn: Eqn) -> None:
        """A host call, or a native call of its own (``policy.call``): its operands and
        results are stored."""
        name = eqn.prim.name
        if self.policy.call(eqn):
            group, where = self.new_group("call"), "runs as a native call of its own"
        else:
            group, where = self.new_group("host"), "runs on the host"
        group.host = eqn
        group.reasons.append(f"{name} {where}" + ("" if group.kind == "call" else
                                                   " (no native lowering yet)"))
        # (control flow's runners may point native loops at their operands: not views)
        views = group.kind == "host" and not any(subgraphs(eqn.params))
        for position, atom in enumerate(eqn.inputs):
            if views:
                base = self._reshaped_for_host(atom)
                if base is not None:
                    group.host_reads[position] = atom = base
            self.need(atom, f"input of {name}, which {where}")
            self.loaded_by_calls.add(atom)

    def _reshaped_for_host(self, atom: Var | Literal) -> Var | None:
        """The value ``atom`` reshapes, where a host call may read it in ``atom``'s place
        (the call alone reads ``atom``; its shape comes when it is read): a psum across
        processes stacks a process's one shard on a new axis, which would copy it."""
        eqn = self.producer.get(atom) if isinstance(atom, Var) else None
        if (not self.policy.host_reads_reshapes or eqn is None
                or eqn.prim.name != "reshape" or self.uses.get(atom) != 1
                or not isinstance(eqn.inputs[0], Var)):
            return None
        return eqn.inputs[0]

    def place_ordered(self, eqn: Eqn) -> None:
        """A scatter or scan: a kernel of its own stores its result (no consumer can
        compute an element of it where it needs it)."""
        out = eqn.outputs[0]
        group = self.new_group("loop", out.aval.shape)
        self.ordered_groups.add(group)
        identity = ix.identity(group.syms)
        self.inline(eqn, "ordered", group, {identity})
        what = "writes data-dependent positions" if eqn.prim.name.startswith("scatter") \
            else "carries a running value along its axis"
        group.add_root(out, identity, self.needs.get(out) or
                       f"{eqn.prim.name} {what} (its result is stored)")

    def place_library(self, eqn: Eqn) -> None:
        out = eqn.outputs[0]
        target = self._layout_target(eqn)
        group = target or self._epilogue_for(out)
        if target is not None:
            group.kind = "library"
        elif group is None:
            group = self.new_group("library", out.aval.shape)
            group.add_root(out, ix.identity(group.syms), self._reason(out))
        else:
            group.kind = "library"
            others = len(self.demands.get(out, {})) - 1
            if out in self.needs or others:
                reason = self.needs.get(out) or f"result also read by {others} other kernels"
                group.add_root(out, ix.identity(group.syms), reason)
        group.library = eqn
        for position in range(len(eqn.inputs)):
            base, index, syms = self._fold_operand(eqn, position)
            group.library_operands.append((base, index, syms))
            self.need(base, "operand of dot_general (a BLAS call)")
            self.loaded_by_calls.add(base)

    def _layout_target(self, eqn: Eqn) -> Group | None:
        """The only consumer of this GEMM's product when all it does is copy the whole
        product into its result through views (the heads of attention transposed back
        into rows); the call then writes the product there directly (sets the group's
        ``product_layout``), and the copy is never made."""
        out = eqn.outputs[0]
        demands = self.demands.get(out, {})
        if out in self.needs or out in self.loaded_by_calls or len(demands) != 1:
            return None
        group = next(iter(demands))
        if (group.kind != "loop" or group.outer_rank is not None or len(group.roots) != 1
                or group in self.ordered_groups
                or any(0 in atom.aval.shape for atom in (*eqn.inputs, out))):
            return None
        root = group.roots[0]
        if (group.root_index[root] != ix.identity(group.syms)
                or root.aval.dtype != out.aval.dtype):
            return None
        chain, value = [], root
        while value is not out:
            view = self.producer.get(value)
            if view is None or not group.has_member(view) or not access.is_view(view):
                return None
            chain.append(view)
            value = view.inputs[0]
        if len(chain) != len(group.members):
            return None
        strides = view_strides(chain, ix.row_major_strides(root.aval.shape))
        layout = product_matrix(eqn, strides) if strides is not None else None
        if layout is None:
            return None
        group.product_layout = layout
        return group

    def _epilogue_for(self, out: Var) -> Group | None:
        """A consumer kernel that can run as this GEMM's epilogue, if any: an elementwise
        kernel over the whole product. Other consumers then read the product's buffer,
        so the epilogue kernel must not depend on them."""
        demands = self.demands.get(out, {})
        if out in self.loaded_by_calls:
            return None
        readers = list(demands)
        for group in readers:
            if (group.kind == "loop" and group.outer_rank is None
                    and group.domain == out.aval.shape
                    and demands[group] == {ix.identity(group.syms)}
                    and not self._depends_on_any(group, [g for g in readers if g is not group])):
                return group
        return None

    def _depends_on_any(self, group: Group, others: list[Group]) -> bool:
        if not others:
            return False
        deps = _producers(self.groups)
        return any(_reaches(group, other, deps) for other in others)

    def _fold_operand(self, eqn: Eqn, position: int) -> tuple[Var, Index, tuple[Sym, ...]]:
        """The deepest buffer BLAS can read this operand from, through a chain of views
        (and, where the policy says so, one cast of float32 to the operand's 16-bit type:
        the buffer is then the float32 one, rounded as the GEMM packs it)."""
        operand = eqn.inputs[position]
        syms = operand_syms(operand.aval.shape, "g")
        best = (operand, ix.identity(syms))
        value, index = operand, ix.identity(syms)
        cast_allowed = self.policy.casts_operands and operand.aval.dtype.name in (
            "bfloat16", "float16")
        while value in self.producer and self.policy.native(self.producer[value]):
            view = self.producer[value]
            if _is_float32_cast(view) and cast_allowed:
                cast_allowed = False  # (once: float32 to the operand's type)
            elif not access.is_view(view):
                break
            else:
                index = access.view_operand_index(view, index)
            value = view.inputs[0]
            if not isinstance(value, Var):
                break
            if operand_matrix(eqn, position, value.aval.shape, index, syms) is not None:
                best = (value, index)
        base, base_index = best
        if base is operand and operand_matrix(eqn, position, operand.aval.shape,
                                              base_index, syms) is None:
            raise AssertionError("a contiguous operand always fits BLAS")
        return base, base_index, syms

    # --- values computed in kernels -------------------------------------------------
    def place_value(self, eqn: Eqn, kind: str) -> None:
        out = eqn.outputs[0]
        demands = self.demands.get(out, {})
        if out in self.needs:
            # Stored by its consumer kernel only when no call reads the buffer: a call
            # would have to run after that kernel, which may itself need the call.
            if len(demands) == 1 and out not in self.loaded_by_calls:
                (group, index_set), = demands.items()
                if self._can_store_in(out, kind, group, index_set):
                    self.inline(eqn, kind, group, index_set)
                    group.add_root(out, next(iter(index_set)), self.needs[out])
                    return
            reason = self.needs[out]
        else:
            reason = self._try_inline(eqn, kind, demands)
            if reason is None:
                return
        group = self.new_group("loop", out.aval.shape)
        identity = ix.identity(group.syms)
        self.inline(eqn, kind, group, {identity})
        group.add_root(out, identity, reason)

    def _try_inline(self, eqn: Eqn, kind: str, demands: dict[Group, set[Index]]) -> str | None:
        """Inline into every consumer kernel; or say why the value gets its own kernel."""
        name = eqn.prim.name
        for group, index_set in demands.items():
            why = self._illegal(eqn, kind, group, index_set)
            if why:
                return why
        if len(demands) > 1:
            if kind == "reduction":
                return f"{name} result is used by {len(demands)} kernels (never recomputed)"
            # a constant (a broadcast 0.0) or a view (an index map) costs nothing to redo
            free = all(not isinstance(a, Var) for a in eqn.inputs) or access.is_view(eqn)
            if access.is_expensive(name) or (len(demands) > MAX_DUPLICATES and not free):
                return (f"{name} is used by {len(demands)} kernels; storing it once is "
                        "cheaper than recomputing it in each")
        for group, index_set in list(demands.items()):
            self.inline(eqn, kind, group, index_set)
        return None

    def _illegal(self, eqn: Eqn, kind: str, group: Group, index_set: set[Index]) -> str | None:
        name = eqn.prim.name
        if kind == "reduction":
            return self._reduction_illegal(name, group, index_set)
        if access.is_expensive(name):
            # Recomputing inside a row-wise kernel's reduction loops is intended (the row
            # is in cache); needing it at several output positions is not.
            outside = {i for i in index_set if not any(
                access.is_reduction_sym(s) for s in ix.index_syms(i))}
            if len(outside) > 1:
                return (f"{name} is needed at {len(outside)} different positions by its "
                        "consumer; storing it is cheaper than recomputing it")
        return None

    def _reduction_illegal(self, name: str, group: Group, index_set: set[Index]) -> str | None:
        if group in self.ordered_groups:  # (a GPU runs their loops as kernels of their own)
            return f"{name} result is read by a scatter's or scan's loops"
        if len(index_set) > 1:
            return f"{name} result is needed at several positions by its consumer"
        free = ix.index_syms(next(iter(index_set)))
        if not free <= set(group.syms):
            return f"{name} result is needed inside another reduction's loop"
        rank = _row_rank(free, group.syms)
        if rank is None:
            return (f"the consumer reads the {name} result along axes it iterates inside "
                    "its rows (e.g. a column reduction used row by row)")
        if group.outer_rank is not None and group.outer_rank != rank:
            return (f"the consumer already holds reductions over its last "
                    f"{len(group.syms) - group.outer_rank} axes; this one leaves "
                    f"{rank} outer axes")
        return None

    def _can_store_in(self, out: Var, kind: str, group: Group, index_set: set[Index]) -> bool:
        """Whether ``group`` may compute ``out`` and also store it (visiting each element once)."""
        if len(index_set) != 1 or self._illegal(self.producer[out], kind, group, index_set):
            return False
        syms = ix.bare_syms(next(iter(index_set)))
        if syms is None or len(set(syms)) != len(syms):
            return False
        # The loops must span the whole value: a consumer that reads only part of it (a
        # slice of a program output) would leave the rest of the buffer unwritten.
        if tuple(s.extent for s in syms) != out.aval.shape:
            return False
        rank = group.outer_rank if kind != "reduction" or group.outer_rank is not None \
            else len(syms)
        return set(syms) == set(group.syms) or (
            rank is not None and set(syms) == set(group.syms[:rank]))

    def inline(self, eqn: Eqn, kind: str, group: Group, index_set: set[Index]) -> None:
        group.add_member(eqn)
        for atom in access.memory_operands(eqn, self.producer):
            if eqn.prim.name == "gather":  # (a reshape is read in place, not stored)
                atom = access.stored_through_reshapes(atom, self.producer)
            self.need(atom, f"read from memory by {eqn.prim.name}")
            self.loaded_by_calls.add(atom)
        for index in index_set:
            if kind == "reduction" and group.outer_rank is None:
                group.outer_rank = _row_rank(ix.index_syms(index), group.syms)
            for atom, operand_index in access.operand_demands(eqn, index):
                if isinstance(atom, Var) and not isinstance(atom, Literal):
                    self.demands.setdefault(atom, {}).setdefault(group, set()).add(operand_index)

    def _reason(self, var: Var) -> str:
        """Why a GEMM product is stored rather than passed to an epilogue."""
        if var in self.needs:
            return self.needs[var]
        users = len(self.demands.get(var, {}))
        if users > 1:
            return f"result used by {users} kernels"
        return ("its consumer reads it through a view or reduces it (a GEMM epilogue is "
                "elementwise over the whole product)")


def _is_float32_cast(eqn: Eqn) -> bool:
    return (eqn.prim.name == "convert_element_type"
            and eqn.inputs[0].aval.dtype.name == "float32")


def _row_rank(free: frozenset[ix.Sym], syms: Sequence[ix.Sym]) -> int | None:
    """How many leading loops of a kernel over ``syms`` are the rows of a reduction
    whose result it reads at an index over ``free``; None when those are not leading.
    A loop of extent 1 runs once, so the index may leave it out (a reshape that adds or
    drops a size-1 axis reads it as 0)."""
    rank = max((k + 1 for k, sym in enumerate(syms) if sym in free), default=0)
    if all(sym in free or sym.extent == 1 for sym in syms[:rank]):
        return rank
    return None


# --- sibling fusion and ordering -----------------------------------------------------

def _producers(groups: list[Group],
               reads: dict[Group, set[Var]] | None = None) -> dict[Group, set[Group]]:
    """The groups whose buffers each group reads (``reads``: what each reads, where
    known already)."""
    writer = {v: g for g in groups for v in g.writes()}
    return {g: {writer[v] for v in (reads[g] if reads is not None else g.reads())
                if v in writer and writer[v] is not g}
            for g in groups}


def _reaches(start: Group, goal: Group, deps: dict[Group, set[Group]]) -> bool:
    """Whether ``goal`` is (transitively) a producer of ``start``."""
    stack, seen = [start], set()
    while stack:
        group = stack.pop()
        for dep in deps[group]:
            if dep is goal:
                return True
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return False


def _producer_bits(groups: list[Group], deps: dict[Group, set[Group]]) -> dict[Group, int]:
    """Every group's transitive producers as a bit set (bit ``i``: ``groups[i]``), so
    that whether one group reaches another is one bit test, not a walk of the graph."""
    bit = {g: 1 << i for i, g in enumerate(groups)}
    found: dict[Group, int] = {}
    for start in (g for g in groups if g not in found):
        path, on_path = [start], {start}  # depth first: a group after its producers
        while path:
            group = path[-1]
            waiting = [d for d in deps[group] if d not in found]
            if not on_path.isdisjoint(waiting):
                raise AssertionError("internal error: kernels that depend on each other")
            if waiting:
                path.append(waiting[0])
                on_path.add(waiting[0])
                continue
            bits = 0
            for dep in deps[group]:
                bits |= bit[dep] | found[dep]
            found[group] = bits
            on_path.remove(path.pop())
    return found


def _merge_siblings(groups: list[Group]) -> list[Group]:
    """Merge kernels over the same domain that read a common buffer (multi-output)."""
    # What each group reads, computed once (and again for a group that absorbs another):
    # computing it for every pair tried, after every merge, was most of fusion's time.
    # Only loop groups of the same domain and outer rank are tried as pairs (trying every
    # pair after every merge took 777k tries in ResNet-18's train step).
    reads = {g: set(g.reads()) for g in groups}
    merged = True
    while merged:
        merged = False
        producers = _producer_bits(groups, _producers(groups, reads))
        alike: dict[tuple, list[tuple[int, Group]]] = {}
        for j, group in enumerate(groups):
            if group.kind == "loop":
                alike.setdefault((group.domain, group.outer_rank), []).append((j, group))
        for i, a in enumerate(groups):
            if a.kind != "loop":
                continue
            partner = next((b for j, b in alike[(a.domain, a.outer_rank)]
                            if j > i and not reads[a].isdisjoint(reads[b])
                            and not producers[a] >> j & 1 and not producers[b] >> i & 1), None)
            if partner is not None:
                _absorb(a, partner)
                groups.remove(partner)
                reads[a] = set(a.reads())
                merged = True
                break
    return groups


def _absorb(into: Group, other: Group) -> None:
    for eqn in other.members.values():
        into.add_member(eqn)
    for root in other.roots:
        into.add_root(root, other.root_index[root], "")
    into.reasons.extend(r for r in other.reasons if r not in into.reasons)


def _topological(groups: list[Group]) -> list[Group]:
    """Groups in an order that respects buffers (ties keep the given order)."""
    deps = _producers(groups)
    position = {g: i for i, g in enumerate(groups)}
    done: set[Group] = set()
    order: list[Group] = []
    pending = list(groups)
    while pending:
        ready = next(g for g in pending if deps[g] <= done)
        pending.remove(ready)
        done.add(ready)
        order.append(ready)
    for i, group in enumerate(order):
        group.id = i
    del position
    return order
