"""Which ATen ops Ember lowers, and the split of a graph into the parts Ember compiles and
the rest that PyTorch runs, by ``torch.fx``'s capability-based partitioner."""
from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport

from ember.torch.bucket_rules import tensors
from ember.torch.exchange import is_supported_dtype
from ember.torch.lowerings import EFFECTS, LOWERINGS


def _dtypes_supported(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return is_supported_dtype(value.dtype)
    if isinstance(value, (list, tuple)):
        return all(_dtypes_supported(v) for v in value)
    # (a SymInt is a size, a SymBool a test on sizes: Python values once Ember traces)
    return not isinstance(value, torch.SymFloat)


class EmberSupport(OperatorSupport):
    """An op Ember can lower: it has a table entry and every tensor it reads or makes has
    a dtype Ember holds."""

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module],
                          node: torch.fx.Node) -> bool:
        if node.op != "call_function" or node.target not in LOWERINGS:
            return False
        if node.target is operator.getitem:  # of a multi-output op Ember also runs
            return self.is_node_supported(submodules, node.args[0])
        if _unknown_effect(node):
            return False
        inputs = [arg.meta.get("val") for arg in node.all_input_nodes]
        return _dtypes_supported(node.meta.get("val")) and _dtypes_supported(inputs)


def _unknown_effect(node: torch.fx.Node) -> bool:
    """An effectful op (``with_effects``) that ``EFFECTS`` does not lower."""
    return node.target is torch.ops.higher_order.with_effects and node.args[1] not in EFFECTS


def unsupported_reason(node: torch.fx.Node) -> str:
    """Why Ember leaves ``node`` (one of ``unsupported_nodes``) to PyTorch, in words."""
    if node.target not in LOWERINGS:
        return f"Ember has no lowering for {node.target}"
    if _unknown_effect(node):
        return f"Ember has no lowering for the effectful {node.args[1]}"
    values = [node.meta.get("val"), *(arg.meta.get("val") for arg in node.all_input_nodes)]
    held = sorted({str(t.dtype) for t in tensors(values) if not is_supported_dtype(t.dtype)})
    if held:
        return f"Ember holds no {', '.join(held)} tensors, which {node.target} reads or makes"
    return f"Ember cannot lower {node.target} with a symbolic float argument"


def unsupported_nodes(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The ATen ops of ``graph_module`` Ember cannot lower (not the ``getitem`` nodes that
    take apart their tuples)."""
    support = EmberSupport()
    modules = dict(graph_module.named_modules())
    return [node for node in graph_module.graph.nodes
            if node.op == "call_function" and node.target is not operator.getitem
            and not support.is_node_supported(modules, node)]


class _CompiledPart(torch.nn.Module):
    """A fused partition, run by Ember (the graph module calls it as a submodule)."""

    def __init__(self, run: Callable[..., Any]) -> None:
        super().__init__()
        self.run = run

    def forward(self, *tensors: Any) -> Any:
        return self.run(*tensors)


def split_for_ember(graph_module: torch.fx.GraphModule,
                    compile_part: Callable[[torch.fx.GraphModule], Callable[..., Any]]
                    ) -> torch.fx.GraphModule:
    """``graph_module`` with each maximal supported region replaced by its Ember program;
    the unsupported ops between them stay PyTorch ops."""
    partitioner = CapabilityBasedPartitioner(graph_module, EmberSupport(),
                                             allows_single_node_partition=True)
    fused = partitioner.partition_and_fuse()
    for name, child in list(fused.named_children()):
        if name.startswith("fused_") and isinstance(child, torch.fx.GraphModule):
            setattr(fused, name, _CompiledPart(compile_part(child)))
    return fused
