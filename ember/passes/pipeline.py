"""The graph pass pipeline of each backend, in one place.

``run_pipeline(graph, backend_name)`` runs the backend's passes in order. Around them:

- ``config.verify`` (``EMBER_VERIFY=1``; on in the test suite) runs the IR verifier on
  the input and after every pass, naming the pass that broke an invariant;
- ``config.dump_dir`` (``EMBER_DUMP=dir``) writes the graph before and after every pass
  to ``dir/<NNNN>-<program>.<backend>/<NNNN>-after-<pass>.txt`` (``ember.ir.dump``);
- ``config.log_enabled("compile")`` (``EMBER_LOG=compile``) prints the time of each pass.

The reference backend is the oracle every other backend is tested against, so it only
drops dead code. These passes are the first stage of every backend's compiler pipeline
(``ember.compiler.pipeline``), which runs the stages after them.
"""
from __future__ import annotations

import time

from ember.config import config
from ember.ir.dump import Dump
from ember.ir.graph import Graph
from ember.ir.printer import print_graph
from ember.ir.verifier import VerificationError, verify
from ember.passes.barriers import drop_barriers
from ember.passes.bucketing import bucket_collectives
from ember.passes.combine_sums import combine_sums
from ember.passes.constant_folding import fold_constants
from ember.passes.cond_select import select_small_conds
from ember.passes.cse import cse
from ember.passes.dce import dce
from ember.passes.im2col import lower_convolutions
from ember.passes.licm import licm
from ember.passes.rewrite import GraphPass
from ember.passes.simplify import simplify
from ember.passes.threefry import expand_threefry
from ember.transforms.calls import inline_calls

# Calls (custom_jvp/vjp, checkpoint) are inlined first so every later pass sees across
# them; checkpoint's recomputation stays apart behind its optimization_barrier, which is
# dropped last (code generators need not copy its operands).
_OPTIMIZING: list[GraphPass] = [inline_calls, simplify, fold_constants, cse, licm,
                                fold_constants, combine_sums, simplify, cse, dce, drop_barriers,
                                bucket_collectives]

GRAPH_PIPELINES: dict[str, list[GraphPass]] = {
    "reference": [dce],
    # First: cheap conds as selects (then optimized with the code around them).
    # Last, after the optimizing passes (which fold constant random bits whole): random
    # bits as plain uint32 arithmetic; no convolution kernel in C: im2col + GEMM (only
    # views, a pad, a concatenate and a dot_general, which fusion takes as they come).
    "cpu": [select_small_conds, *_OPTIMIZING, expand_threefry, lower_convolutions],
    "cuda": [select_small_conds, *_OPTIMIZING, expand_threefry],
    "opencl": [select_small_conds, *_OPTIMIZING, expand_threefry],
}



def run_pipeline(graph: Graph, backend_name: str, program_name: str | None = None, *,
                 dump: Dump | None = None) -> Graph:
    """``graph`` after the passes of ``GRAPH_PIPELINES[backend_name]`` (none while
    ``config.optimize`` is off: the graph is then returned as traced).

    ``dump``: the program's dump folder, where the compiler pipeline made one; else
    one is opened here, named ``program_name`` (default: the user function of the
    first equation with a source location).
    """
    if backend_name not in GRAPH_PIPELINES:
        raise KeyError(f"no graph pipeline for backend {backend_name!r}; pipelines: "
                       f"{sorted(GRAPH_PIPELINES)}")
    dump = dump or Dump.open(graph, backend_name, program_name)
    _check(graph, "in the graph given to the pipeline")
    _write(dump, "input", graph)
    passes = GRAPH_PIPELINES[backend_name] if config.optimize else []
    for step, graph_pass in enumerate(passes, start=1):
        start = time.perf_counter()
        graph = graph_pass(graph)
        elapsed = time.perf_counter() - start
        if config.log_enabled("compile"):
            print(f"ember: pass {graph_pass.__name__} ({backend_name}) in {elapsed:.4f} s, "
                  f"{len(graph.eqns)} equations")
        _check(graph, f"after pass {step} ({graph_pass.__name__})")
        _write(dump, f"after-{graph_pass.__name__}", graph)
    return graph


def _check(graph: Graph, what: str) -> None:
    if not config.verify:
        return
    try:
        verify(graph)
    except VerificationError as error:
        raise VerificationError(f"{what}: {error}") from None


def _write(dump: Dump | None, label: str, graph: Graph) -> None:
    if dump is not None:
        dump.write(f"{label}.txt", print_graph(graph))
