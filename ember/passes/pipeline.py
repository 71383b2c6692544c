"""The graph pass pipeline of each backend, in one place.

``run_pipeline(graph, backend_name)`` runs the backend's passes in order. Around them:

- ``config.verify`` (``EMBER_VERIFY=1``; on in the test suite) runs the IR verifier on
  the input and after every pass, naming the pass that broke an invariant;
- ``config.dump_dir`` (``EMBER_DUMP=dir``) writes the graph before and after every pass
  to ``dir/<NNNN>-<program>.<backend>/<NNNN>-after-<pass>.txt``;
- ``config.log_enabled("compile")`` (``EMBER_LOG=compile``) prints the time of each pass.

The reference backend is the oracle every other backend is tested against, so it only
drops dead code. Backends that generate code run their schedule-level passes (fusion,
memory planning) after these.
"""
from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

from ember.config import config
from ember.ir.graph import Graph
from ember.ir.printer import print_graph
from ember.ir.verifier import VerificationError, verify
from ember.passes.barriers import drop_barriers
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
                                fold_constants, simplify, cse, dce, drop_barriers]

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

_program_numbers = itertools.count(1)


def run_pipeline(graph: Graph, backend_name: str, program_name: str | None = None) -> Graph:
    """``graph`` after the passes of ``GRAPH_PIPELINES[backend_name]`` (none while
    ``config.optimize`` is off: the graph is then returned as traced).

    ``program_name`` names the dump folder (default: the user function of the first
    equation with a source location).
    """
    if backend_name not in GRAPH_PIPELINES:
        raise KeyError(f"no graph pipeline for backend {backend_name!r}; pipelines: "
                       f"{sorted(GRAPH_PIPELINES)}")
    dump = _dump_folder(graph, backend_name, program_name)
    _check(graph, "in the graph given to the pipeline")
    _write(dump, 0, "input", graph)
    passes = GRAPH_PIPELINES[backend_name] if config.optimize else []
    for step, graph_pass in enumerate(passes, start=1):
        start = time.perf_counter()
        graph = graph_pass(graph)
        elapsed = time.perf_counter() - start
        if config.log_enabled("compile"):
            print(f"ember: pass {graph_pass.__name__} ({backend_name}) in {elapsed:.4f} s, "
                  f"{len(graph.eqns)} equations")
        _check(graph, f"after pass {step} ({graph_pass.__name__})")
        _write(dump, step, f"after-{graph_pass.__name__}", graph)
    return graph


def _check(graph: Graph, what: str) -> None:
    if not config.verify:
        return
    try:
        verify(graph)
    except VerificationError as error:
        raise VerificationError(f"{what}: {error}") from None


def _dump_folder(graph: Graph, backend_name: str, program_name: str | None) -> Path | None:
    if not config.dump_dir:
        return None
    name = program_name or _guess_name(graph)
    folder = Path(config.dump_dir) / f"{next(_program_numbers):04d}-{name}.{backend_name}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _guess_name(graph: Graph) -> str:
    for eqn in graph.eqns:
        if eqn.source is not None:
            return re.sub(r"[^A-Za-z0-9_]+", "_", eqn.source.function).strip("_") or "program"
    return "program"


def _write(folder: Path | None, step: int, label: str, graph: Graph) -> None:
    if folder is not None:
        (folder / f"{step:04d}-{label}.txt").write_text(print_graph(graph) + "\n")
