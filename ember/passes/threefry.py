"""Threefry-2x32 as plain uint32 arithmetic, for backends that generate their kernels.

The ``threefry2x32`` primitive has no kernel of its own: left as it is, it runs on the
host (NumPy), a call out of the native program for every random draw under ``jit``
(a dropout mask of 1M elements took 60 ms on the CPU). This pass replaces it by the
cipher's rounds as elementwise primitives (``ops.random_bits.threefry_rounds``, the same
code as the reference), which fusion makes one loop kernel, usually fused with the code
that turns the bits into the distribution. The bits are identical: only exact uint32
arithmetic is involved.
"""
from __future__ import annotations

from ember.ir.graph import Eqn, Graph
from ember.ops.random_bits import threefry_rounds
from ember.passes.rewrite import Expansion, expand_equations


def expand_threefry(graph: Graph) -> Graph:
    """``graph`` with every ``threefry2x32`` (also in nested graphs) as its rounds."""
    return expand_equations(graph, _expansion)


def _expansion(eqn: Eqn) -> Expansion | None:
    return threefry_rounds if eqn.prim.name == "threefry2x32" else None
