"""``ember.torch.explain``: which ops of a model would stay in PyTorch, and from which
line of the user's code."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch._functorch.aot_autograd import make_boxed_func

from ember.torch.backend import make_backend
from ember.torch.source import node_source
from ember.torch.partition import unsupported_nodes


@dataclass(frozen=True)
class Fallback:
    op: str
    source: str  # the user's line ("File ..., line N, in f"), "" where unknown


@dataclass
class Explanation:
    graphs: int = 0
    ops: int = 0
    fallbacks: list[Fallback] = field(default_factory=list)

    def __str__(self) -> str:
        summary = (f"{self.graphs} graph(s), {self.ops} ATen op(s), "
                   f"{len(self.fallbacks)} run by PyTorch")
        lines = [summary]
        lines += [f"  {f.op}" + (f"  at {f.source}" if f.source else "") for f in self.fallbacks]
        return "\n".join(lines)


def explain(model: Any, *inputs: Any, **kwargs: Any) -> Explanation:
    """Trace ``model(*inputs, **kwargs)`` as ``torch.compile(backend="ember")`` would (the
    forward graph) and list every ATen op Ember has no lowering for. Nothing is compiled."""
    report = Explanation()

    def record(graph_module: torch.fx.GraphModule, example_inputs: Any):
        report.graphs += 1
        report.ops += sum(node.op == "call_function" for node in graph_module.graph.nodes)
        report.fallbacks += [Fallback(str(node.target), node_source(node))
                             for node in unsupported_nodes(graph_module)]
        return make_boxed_func(graph_module.forward)

    torch._dynamo.reset()  # trace afresh, not from an earlier compile's cache
    compiled = torch.compile(model, backend=make_backend(record), dynamic=False)
    compiled(*inputs, **kwargs)
    torch._dynamo.reset()
    return report
