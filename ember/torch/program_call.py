"""One compiled program of an ATen graph, called with tensors: the per-call work of the
bridge, kept to a conversion per tensor. What it can decide once (which inputs are
tensors, which results are sizes, which return an input as it is) it decides when the
program is compiled; a train step calls two of these (forward, backward) and each may
take dozens of tensors (an unrolled LSTM saves every step's gates for its backward)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from ember.core.pytree import tree_unflatten
from ember.runtime.jit import Compiled
from ember.torch.exchange import to_ember, to_torch

_NONE, _RESULT, _SIZE, _INPUT = range(4)  # what an output of the graph is


class ProgramCall:
    """Calls ``compiled`` (traced from ``graph``) with the graph's inputs: its tensors
    (then the real sizes of a bucketed graph) go in, by shared memory, and its outputs
    come back as tensors, ints for sizes, and None where the graph returns None. An
    output that is an input, unchanged, is that input tensor (as eager PyTorch and
    inductor return it), not a copy of it."""

    def __init__(self, compiled: Compiled, graph: torch.fx.Graph, inputs: Sequence[Any],
                 size_outputs: set[int]) -> None:
        self._compiled = compiled
        self._tensors = [i for i, value in enumerate(inputs) if isinstance(value, torch.Tensor)]
        placeholders = {node: i for i, node in enumerate(graph.find_nodes(op="placeholder"))}
        (returned,) = graph.find_nodes(op="output")[0].args
        structure = tree_unflatten(compiled.out_tree, range(compiled.out_tree.num_leaves))
        self._plan: list[tuple[int, int]] | None = None
        if isinstance(returned, (list, tuple)) and isinstance(structure, (list, tuple)) \
                and len(structure) == len(returned) \
                and all(leaf is None or isinstance(leaf, int) for leaf in structure):
            self._plan = [_output(i, leaf, returned[i], placeholders, inputs, size_outputs)
                          for i, leaf in enumerate(structure)]
            self._kind = tuple if isinstance(returned, tuple) else list
        self._size_outputs = size_outputs

    def __call__(self, inputs: Sequence[Any], real_sizes: Sequence[torch.Tensor]) -> Any:
        arrays = [to_ember(inputs[i]) for i in self._tensors]
        arrays += [to_ember(size) for size in real_sizes]
        results = self._compiled.call_host(arrays)
        if self._plan is None:
            return self._structured(results)
        return self._kind(
            None if kind == _NONE else to_torch(results[value]) if kind == _RESULT
            else inputs[value] if kind == _INPUT else int(results[value])
            for kind, value in self._plan)

    def _structured(self, results: list[Any]) -> Any:
        """The outputs of a graph that returns a nested structure (or one tensor)."""
        outputs = tree_unflatten(self._compiled.out_tree, [to_torch(r) for r in results])
        if self._size_outputs:
            return [int(o) if i in self._size_outputs else o for i, o in enumerate(outputs)]
        return outputs


def _output(position: int, leaf: int | None, node: Any, placeholders: dict, inputs: Sequence[Any],
            size_outputs: set[int]) -> tuple[int, int]:
    if leaf is None:
        return _NONE, 0
    if position in size_outputs:
        return _SIZE, leaf
    index = placeholders.get(node) if isinstance(node, torch.fx.Node) else None
    if index is not None and index < len(inputs) and isinstance(inputs[index], torch.Tensor):
        return _INPUT, index
    return _RESULT, leaf
