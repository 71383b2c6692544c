"""Reference backend: every primitive runs its NumPy implementation; the only pass is
dead code elimination (see passes/pipeline.py), so it stays the oracle."""
from __future__ import annotations

from typing import Any, Sequence

from ember.backends.base import Backend, Executable
from ember.core.primitive import Primitive
from ember.ir.graph import Graph
from ember.ir.interpreter import as_numpy, eval_graph, reference_apply


class ReferenceExecutable(Executable):
    def run(self, buffers: Sequence[Any]) -> list[Any]:
        outs = eval_graph(self.optimized, list(buffers))
        # NumPy returns scalars (not 0-d arrays) from some 0-d operations: buffers are arrays.
        return [as_numpy(value, atom.aval.dtype) for value, atom in
                zip(outs, self.optimized.outputs)]


class ReferenceBackend(Backend):
    name = "reference"

    def apply_primitive(self, prim: Primitive, buffers: list, params: dict) -> Any:
        return reference_apply(prim, buffers, params)

    def compile(self, graph: Graph, donated: Sequence[bool] = ()) -> Executable:
        from ember.compiler.pipeline import compile_program
        from ember.passes.analysis import cost_of_graph, peak_memory

        optimized = compile_program(graph, self.name).optimized
        return ReferenceExecutable(graph=graph, optimized=optimized,
                                   cost=cost_of_graph(optimized), memory=peak_memory(optimized))
