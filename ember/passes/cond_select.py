"""Small conds as selects, for backends that generate their kernels.

A ``cond`` runs on the host: the branch is chosen in Python and its compiled graph
called. Inside a loop body that host step also keeps the loop itself from running
natively (control.py), so a ``fori_loop`` whose body holds a small ``cond`` ran ~100x
slower than without it. When every branch is cheap, computing all of them and
selecting the chosen one's results (as ``vmap`` of a ``cond`` with a batched predicate
does) costs less than that host step, and fuses with the code around it.

Computing a branch that is not taken is safe here: generated code defines every
operation on every input (integer division by zero included) and out-of-range indices
are clamped. Branches with loops (unbounded work) are left alone, and nothing changes
under ``debug_nans``, where a NaN of an untaken branch would be reported.
"""
from __future__ import annotations

from ember.config import config
from ember.ir.graph import Eqn, Graph, all_eqns, has_effects
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops.elementwise import select_n
from ember.passes.analysis import cost_of_graph
from ember.passes.rewrite import Expansion, expand_equations

# All branches together: at most this many bytes read and written, and flops. About
# what a host step costs (tens of microseconds); a loop that stays native saves more.
MAX_BYTES = 256 * 1024
MAX_FLOPS = 256 * 1024
_LOOPS = ("while", "scan")


def select_small_conds(graph: Graph) -> Graph:
    """``graph`` with every cheap ``cond`` (also in nested graphs) as selects."""
    if config.debug_nans:
        return graph
    return expand_equations(graph, _expansion)


def _expansion(eqn: Eqn) -> Expansion | None:
    if eqn.prim.name != "cond" or has_effects(eqn) or not _cheap(eqn.params["branches"]):
        return None
    branches = eqn.params["branches"]

    def all_branches(index, *operands):
        results = [eval_graph(branch, list(operands), apply=bind_equation)
                   for branch in branches]
        if len(branches) == 1:
            return results[0]
        return [select_n(index, *outs) for outs in zip(*results)]

    return all_branches


def _cheap(branches) -> bool:
    costs = [cost_of_graph(branch) for branch in branches]
    return (sum(c["bytes accessed"] for c in costs) <= MAX_BYTES
            and sum(c["flops"] for c in costs) <= MAX_FLOPS
            and not any(_has_loop(branch) for branch in branches))


def _has_loop(graph: Graph) -> bool:
    return any(eqn.prim.name in _LOOPS for eqn in all_eqns(graph))
