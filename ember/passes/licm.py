"""Loop-invariant code motion: compute once, before the loop, what a loop body computes
from loop-invariant values only.

A loop primitive declares where its bodies and their invariant inputs are in
``LOOP_REGIONS`` (the protocol: see ``LoopRegion``). An equation of a body is hoisted
when every operand is a literal, an invariant input, or the result of a hoisted
equation; its results still read by the body become new invariant inputs. Primitives
are pure, so running hoisted work even when the loop runs zero times is harmless.

Broadcasts stay in the body: fusion folds them into the kernel that reads them, while
hoisting would materialize them (and so do the equations that read them). Nested loops
are processed inside out, so work can leave several levels in one pass.
"""
from __future__ import annotations

from dataclasses import dataclass

from ember.ir.graph import Atom, Eqn, Graph, Var, has_effects
from ember.passes.rewrite import in_subgraphs, substitute


@dataclass(frozen=True)
class LoopRegion:
    """One body of a loop primitive and its loop-invariant inputs.

    ``params[body]`` is the body graph; its first ``params[nconsts]`` inputs are the same
    in every iteration and receive the equation's operands that start at operand
    ``sum(params[name] for name in after)``.
    """

    body: str
    nconsts: str
    after: tuple[str, ...] = ()


LOOP_REGIONS: dict[str, tuple[LoopRegion, ...]] = {
    "scan": (LoopRegion("body", "num_consts"),),
    "while": (LoopRegion("cond_graph", "cond_nconsts"),
              LoopRegion("body_graph", "body_nconsts", after=("cond_nconsts",))),
}

NOT_HOISTED = frozenset({"broadcast_in_dim"})


def licm(graph: Graph) -> Graph:
    """``graph`` with loop-invariant work moved out of loop bodies."""
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        eqn = in_subgraphs(eqn, licm)
        for region in LOOP_REGIONS.get(eqn.prim.name, ()):
            hoisted, eqn = _hoist(eqn, region)
            eqns.extend(hoisted)
        eqns.append(eqn)
    return graph.replace(eqns=eqns)


def _hoist(eqn: Eqn, region: LoopRegion) -> tuple[list[Eqn], Eqn]:
    """The equations hoisted out of one region, and the loop equation without them."""
    body: Graph = eqn.params[region.body]
    nconsts = eqn.params[region.nconsts]
    offset = sum(eqn.params[name] for name in region.after)
    outer: dict[Var, Atom] = dict(zip(body.inputs[:nconsts], eqn.inputs[offset:offset + nconsts]))
    hoisted: list[Eqn] = []
    moved: list[Var] = []  # body variables now computed outside
    kept: list[Eqn] = []
    for inner in body.eqns:
        if not _invariant(inner, outer):
            kept.append(inner)
            continue
        outside = inner.replace(inputs=[substitute(a, outer) for a in inner.inputs],
                                outputs=[Var(v.aval, v.hint) for v in inner.outputs])
        outer.update(zip(inner.outputs, outside.outputs))
        moved.extend(inner.outputs)
        hoisted.append(outside)
    if not hoisted:
        return [], eqn
    read = {a for e in kept for a in e.inputs} | set(body.outputs)
    new_inputs = [var for var in moved if var in read]
    body = body.replace(inputs=[*body.inputs[:nconsts], *new_inputs, *body.inputs[nconsts:]],
                        eqns=kept)
    split = offset + nconsts
    operands = [*eqn.inputs[:split], *(outer[v] for v in new_inputs), *eqn.inputs[split:]]
    params = {**eqn.params, region.body: body, region.nconsts: nconsts + len(new_inputs)}
    return hoisted, eqn.replace(inputs=operands, params=params)


def _invariant(eqn: Eqn, outer: dict[Var, Atom]) -> bool:
    variables = [a for a in eqn.inputs if isinstance(a, Var)]
    return (eqn.prim.name not in NOT_HOISTED and not has_effects(eqn) and bool(variables)
            and all(v in outer for v in variables))
