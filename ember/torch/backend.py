"""The ``torch.compile`` backend: Dynamo's graph goes through AOTAutograd (forward and
backward graphs, functionalized, decomposed to core ATen by PyTorch's own tables), and
each graph is compiled by Ember, with the ops Ember has no lowering for left to PyTorch."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch._dynamo.utils import guard_failures
from torch._functorch import config as functorch_config
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._guards import CompileContext

from ember.errors import EmberTypeError
from ember.runtime.collection_pause import collection_paused
from ember.torch.decompositions import core_aten_table
from ember.torch.graph_compiler import log
from ember.torch.onednn import onednn_off
from ember.torch.partition import split_for_ember, unsupported_nodes, unsupported_reason
from ember.torch.source import node_source
from ember.torch.stages import compile_graph

GraphCompiler = Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]


def _log_recompile() -> None:
    """Say why Dynamo compiles a frame again: the guards of its earlier compiles that
    failed (a new shape, with static shapes), as PyTorch recorded them."""
    compile_id = CompileContext.current_compile_id()
    if compile_id is None or not compile_id.frame_compile_id:
        return
    prefix = f"{compile_id.frame_id}/"
    reasons = [reason for failures in guard_failures.values() for reason in failures
               if reason.startswith(prefix)][-compile_id.frame_compile_id:]
    log.info("Ember recompiles (compile %s) because %s", compile_id,
             "; ".join(reasons) or "Dynamo's guards failed")


def ember_graph_compiler(fallback: bool = True) -> GraphCompiler:
    """The forward / backward compiler AOTAutograd calls with each ATen graph."""
    def compile_aten(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        unsupported = unsupported_nodes(graph_module)
        if not unsupported:
            return make_boxed_func(compile_graph(graph_module))
        if not fallback:
            first = unsupported[0]
            where = node_source(first)
            raise EmberTypeError(
                f"{unsupported_reason(first)}{' (' + where + ')' if where else ''}"
                f" and fallback is off; {len(unsupported)} op(s) unsupported: "
                f"{sorted({str(n.target) for n in unsupported})}")
        split = split_for_ember(graph_module, compile_graph)
        return make_boxed_func(split.forward)
    return compile_aten


def make_backend(graph_compiler: GraphCompiler) -> Callable[..., Any]:
    """A Dynamo backend that hands AOTAutograd's graphs to ``graph_compiler``."""
    def backend(graph_module: torch.fx.GraphModule, example_inputs: list[Any], **_options: Any):
        _log_recompile()
        with onednn_off():
            # (the min-cut partition, inductor's, saves fewer of the forward's values for
            # the backward, recomputing cheap elementwise ones there: each saved value is
            # a result and an argument, a crossing of the bridge, per step; an 8-step LSTM
            # saves 53, not 106. Without its CSE of the joint graph, which would import
            # much of inductor, seconds of a first call: Ember's pipeline has its own.)
            with functorch_config.patch(cse=False), collection_paused():
                return aot_module_simplified(graph_module, example_inputs,
                                             fw_compiler=graph_compiler,
                                             bw_compiler=graph_compiler,
                                             partition_fn=min_cut_rematerialization_partition,
                                             decompositions=core_aten_table())
    return backend


ember_backend = make_backend(ember_graph_compiler(fallback=True))
ember_backend.__doc__ = "``torch.compile(model, backend='ember')``: Ember compiles the graphs."
strict_backend = make_backend(ember_graph_compiler(fallback=False))
strict_backend.__doc__ = "Like ``ember_backend``, but an op Ember cannot lower is an error."
