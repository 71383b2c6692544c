"""One compiled program of an ATen graph, called with tensors: the per-call work of the
bridge, kept to a conversion per tensor. What it can decide once (which inputs are
tensors, which results are sizes, which return an input as it is) it decides when the
program is compiled; a train step calls two of these (forward, backward) and each may
take dozens of tensors (an unrolled LSTM saves every step's gates for its backward)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from ember.core.pytree import tree_unflatten
from ember.runtime.jit import Compiled
from ember.torch.exchange import (fresh_to_torch, is_supported_dtype, numpy_dtype, to_ember,
                                  to_torch)

_NONE, _RESULT, _SIZE, _INPUT = range(4)  # what an output of the graph is


class ProgramCall:
    """Calls ``compiled`` (traced from ``graph``) with the graph's inputs: its tensors
    (then the real sizes of a bucketed graph) go in by address (or as NumPy views of
    the same memory, where the program cannot take addresses), and its outputs
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
        self._by_address = _by_address(compiled, [inputs[i] for i in self._tensors],
                                       self._tensors, structure, self._plan)

    def __call__(self, inputs: Sequence[Any], real_sizes: Sequence[torch.Tensor]) -> Any:
        tensors = [inputs[i] for i in self._tensors]
        tensors += real_sizes
        results = self._call_at_addresses(tensors)
        if results is None:
            results = self._compiled.call_host([to_ember(t) for t in tensors])
            as_tensor = to_torch
        else:
            as_tensor = fresh_to_torch
        if self._plan is None:
            return self._structured(results, as_tensor)
        return self._kind(
            None if kind == _NONE else as_tensor(results[value]) if kind == _RESULT
            else inputs[value] if kind == _INPUT else int(results[value])
            for kind, value in self._plan)

    def _call_at_addresses(self, tensors: list[torch.Tensor]) -> list[Any] | None:
        """The results of a call that passes each tensor's address (a NumPy view of each
        costs more than a small program runs: an unrolled LSTM's backward takes 50
        tensors); None where a tensor is not plain contiguous CPU memory or the program
        cannot take addresses. (The caller chose this program by the tensors' shapes
        and dtypes.)"""
        if not self._by_address:
            return None
        for tensor in tensors:
            if not (tensor.is_cpu and tensor.is_contiguous()) or tensor.is_neg() \
                    or tensor.is_conj():
                return None
        return self._compiled.call_addresses([t.data_ptr() for t in tensors])

    def _structured(self, results: list[Any], as_tensor: Callable[[Any], torch.Tensor]) -> Any:
        """The outputs of a graph that returns a nested structure (or one tensor)."""
        outputs = tree_unflatten(self._compiled.out_tree, [as_tensor(r) for r in results])
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


def _by_address(compiled: Compiled, tensors: list[torch.Tensor], positions: list[int],
                structure: Any, plan: list[tuple[int, int]] | None) -> bool:
    """Whether calls may pass the tensors (at ``positions`` of the graph's inputs) by
    address: the program reads each one's dtype as it is, and each result it then
    returns as None (an argument returned as it is) is planned as that input."""
    in_avals = compiled.executable.graph.in_avals
    if len(tensors) > len(in_avals) or not all(
            is_supported_dtype(t.dtype) and numpy_dtype(t.dtype) == aval.dtype
            for t, aval in zip(tensors, in_avals)):
        return False
    returned = compiled.returned_arguments()  # {result (leaf): argument}
    if not returned:
        return True
    planned = {} if plan is None else {
        leaf: plan[i] for i, leaf in enumerate(structure) if leaf is not None}
    return all(argument < len(positions) and planned.get(leaf) == (_INPUT, positions[argument])
               for leaf, argument in returned.items())
