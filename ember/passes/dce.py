"""Dead code elimination: drop equations whose results nothing reads.

Every primitive but the effectful ones (debug callbacks) is pure (random bits too: keys
are explicit), so an equation none of whose outputs is used can go. Unused constants go too; the graph's inputs stay (they
are its signature). Nested graphs are cleaned inside.

Control-flow primitives also lose what is dead across their boundary, through a rule in
``PRUNING_RULES``: ``rule(eqn, used) -> eqn`` returns an equation producing a subset of
``eqn``'s outputs that contains every used one (keeping their ``Var`` objects), with
operands its bodies do not read removed. Rules exist for ``scan`` (unused ys, carries
that no live value depends on, unread consts and xs), ``while`` (carries that neither
the condition nor a live carry reads, unread consts) and ``cond`` (unused outputs,
operands no branch reads). Operand layouts are those of ``ember/ops/control_flow.py``.
"""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from ember.ir.graph import Eqn, Graph, Var, has_effects
from ember.passes.rewrite import in_subgraphs

PRUNING_RULES: dict[str, Callable[[Eqn, list[bool]], Eqn]] = {}
T = TypeVar("T")


def dce(graph: Graph) -> Graph:
    """``graph`` without the equations and constants its outputs do not depend on."""
    live = {atom for atom in graph.outputs if isinstance(atom, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(graph.eqns):
        used = [var in live for var in eqn.outputs]
        if not any(used) and not has_effects(eqn):
            continue
        rule = PRUNING_RULES.get(eqn.prim.name)
        eqn = in_subgraphs(rule(eqn, used) if rule else eqn, dce)
        live.update(atom for atom in eqn.inputs if isinstance(atom, Var))
        kept.append(eqn)
    keep = [i for i, var in enumerate(graph.constvars) if var in live]
    return graph.replace(eqns=kept[::-1], constvars=[graph.constvars[i] for i in keep],
                         constvals=[graph.constvals[i] for i in keep] if graph.constvals else [])


# --- helpers for rules --------------------------------------------------------------------

def needed_inputs(graph: Graph, live_outputs: Sequence[bool]) -> list[bool]:
    """Which inputs of ``graph`` the outputs marked live (and its effects) depend on."""
    live = {a for a, keep in zip(graph.outputs, live_outputs) if keep and isinstance(a, Var)}
    for eqn in reversed(graph.eqns):
        if any(var in live for var in eqn.outputs) or has_effects(eqn):
            live.update(atom for atom in eqn.inputs if isinstance(atom, Var))
    return [var in live for var in graph.inputs]


def _pick(items: Sequence[T], keep: Sequence[bool]) -> list[T]:
    return [item for item, k in zip(items, keep) if k]


def _restrict(graph: Graph, keep_inputs: Sequence[bool], keep_outputs: Sequence[bool]) -> Graph:
    """``graph`` with only the kept inputs and outputs, cleaned."""
    return dce(graph.replace(inputs=_pick(graph.inputs, keep_inputs),
                             outputs=_pick(graph.outputs, keep_outputs)))


def _close_carries(body: Graph, offset: int, live: list[bool], ys_live: list[bool]) -> tuple[
        list[bool], list[bool]]:
    """Grow the live carries until every carry a live output reads is live; returns
    (live carries, needed body inputs). Carries start at body input ``offset``."""
    while True:
        needed = needed_inputs(body, [*live, *ys_live])
        grown = [keep or read for keep, read in zip(live, needed[offset:offset + len(live)])]
        if grown == live:
            return live, needed
        live = grown


# --- rules ----------------------------------------------------------------------------------

def _prune_scan(eqn: Eqn, used: list[bool]) -> Eqn:
    params = eqn.params
    nconsts, ncarry = params["num_consts"], params["num_carry"]
    live, needed = _close_carries(params["body"], nconsts, used[:ncarry], used[ncarry:])
    keep_in = [*needed[:nconsts], *live, *needed[nconsts + ncarry:]]
    keep_out = [*live, *used[ncarry:]]
    if all(keep_in) and all(keep_out):
        return eqn
    body = _restrict(params["body"], keep_in, keep_out)
    return eqn.replace(inputs=_pick(eqn.inputs, keep_in), outputs=_pick(eqn.outputs, keep_out),
                       params={**params, "body": body, "num_consts": sum(needed[:nconsts]),
                               "num_carry": sum(live)})


def _prune_while(eqn: Eqn, used: list[bool]) -> Eqn:
    params = eqn.params
    ncond, nbody = params["cond_nconsts"], params["body_nconsts"]
    cond_needed = needed_inputs(params["cond_graph"], [True])
    start = [u or read for u, read in zip(used, cond_needed[ncond:])]
    live, needed = _close_carries(params["body_graph"], nbody, start, [])
    keep_in = [*cond_needed[:ncond], *needed[:nbody], *live]
    if all(keep_in):
        return eqn
    cond = _restrict(params["cond_graph"], [*cond_needed[:ncond], *live], [True])
    body = _restrict(params["body_graph"], [*needed[:nbody], *live], live)
    return eqn.replace(inputs=_pick(eqn.inputs, keep_in), outputs=_pick(eqn.outputs, live),
                       params={**params, "cond_graph": cond, "body_graph": body,
                               "cond_nconsts": sum(cond_needed[:ncond]),
                               "body_nconsts": sum(needed[:nbody])})


def _prune_cond(eqn: Eqn, used: list[bool]) -> Eqn:
    branches = eqn.params["branches"]
    reads = [needed_inputs(branch, used) for branch in branches]
    needed = [any(column) for column in zip(*reads)]
    if all(used) and all(needed):
        return eqn
    branches = tuple(_restrict(branch, needed, used) for branch in branches)
    return eqn.replace(inputs=[eqn.inputs[0], *_pick(eqn.inputs[1:], needed)],
                       outputs=_pick(eqn.outputs, used),
                       params={**eqn.params, "branches": branches})


PRUNING_RULES.update({"scan": _prune_scan, "while": _prune_while, "cond": _prune_cond})
