"""Shape buckets for ATen graphs with symbolic sizes (``dynamic=True`` / ``mark_dynamic``):
a size ``s`` runs padded up to its power-of-two bucket, so that the sizes 5 to 8 share one
compiled program, and the outputs are sliced back to ``s``.

Padding is correct only where the padded positions never mix into the real ones:
``ember.torch.bucket_rules`` walks the graph's ops and keeps a size bucketed only if every
op keeps its padding apart, or can be made to by a mask (``ember.torch.bucket_masks``:
a select against the real size, which reaches the graph as a 0-d input, so every size in
a bucket runs the same program). Any other use of the size refuses the bucket for it,
and the reason names the op and the user's line: the graph then compiles once per size.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx

from ember.torch.bucket_masks import MaskBuilder
from ember.torch.bucket_rules import Edit, Layouts, Refused, analyse, expr, involves


def bucket(size: int) -> int:
    """The power of two that ``size`` is padded up to."""
    return 1 << max(size - 1, 0).bit_length()


@dataclass
class BucketPlan:
    """How one graph runs padded: the size inputs it buckets (by position), the dims of
    the inputs and outputs to pad and slice back, and the graph with its masks added (it
    takes one 0-d int64 real size per bucketed size, after its own inputs)."""
    graph_module: torch.fx.GraphModule
    sizes: dict[int, sympy.Symbol]  # input position -> symbol, of the bucketed sizes
    symbols: dict[int, sympy.Symbol]  # ... of every size input that is a symbol
    size_inputs: dict[int, Any]  # input position -> the expression of a size of bucketed ones
    # input and output position -> (dim, size position, outer, inner): the layout of a
    # padded dim (see bucket_masks)
    input_dims: dict[int, list[tuple[int, int, Any, Any]]]
    output_dims: dict[int, list[tuple[int, int, Any, Any]]]
    size_outputs: dict[int, Any]  # output position -> its symbolic value
    refusals: dict[str, str] = field(default_factory=dict)  # symbol -> why not bucketed

    def pad(self, inputs: Sequence[Any]) -> tuple[list[Any], list[torch.Tensor]]:
        """The inputs padded to their buckets (sizes replaced by their buckets), and the
        real sizes as 0-d tensors for the masks."""
        padded = list(inputs)
        values = {symbol: inputs[p] for p, symbol in self.symbols.items()}
        values.update({symbol: bucket(inputs[p]) for p, symbol in self.sizes.items()})
        for position, size in self.size_inputs.items():  # (s0, and sizes made of it: 8*s0)
            padded[position] = int(size.xreplace(values))
        for position, dims in self.input_dims.items():
            for dim, size_position, outer, inner in dims:
                padded[position] = _pad(padded[position], dim, _count(outer, values),
                                        _count(inner, values), padded[size_position])
        return padded, [torch.tensor(inputs[p], dtype=torch.int64) for p in self.sizes]

    def unpad(self, outputs: Any, inputs: Sequence[Any]) -> Any:
        """The outputs sliced back to the real sizes of ``inputs``."""
        if not isinstance(outputs, (list, tuple)):
            return outputs
        real = {symbol: inputs[p] for p, symbol in self.symbols.items()}
        result = list(outputs)
        for position, dims in self.output_dims.items():
            for dim, size_position, outer, inner in dims:
                result[position] = _unpad(result[position], dim, _count(outer, real),
                                          _count(inner, real), inputs[size_position])
        for position, value in self.size_outputs.items():
            result[position] = int(expr(value).xreplace(real))
        return type(outputs)(result)

    def describe(self, inputs: Sequence[Any]) -> str:
        """``s0=5 in bucket 8``, for the log."""
        return ", ".join(f"{symbol}={inputs[p]} in bucket {bucket(inputs[p])}"
                         for p, symbol in self.sizes.items())


def _count(count: Any, values: dict[sympy.Symbol, int]) -> int:
    """A factor or layout (an int, or an expression of sizes compiled per value)."""
    return int(sympy.sympify(count).xreplace(values))


def _pad(tensor: torch.Tensor, dim: int, outer: int, inner: int, size: int) -> torch.Tensor:
    """A dim padded to the bucket ``size`` in the layout ``(outer, inner)``, with zeros."""
    blocks = tensor.unflatten(dim, (outer, -1, inner))
    if blocks.shape[dim + 1] == size:
        return tensor
    shape = list(blocks.shape)
    shape[dim + 1] = size
    padded = blocks.new_zeros(shape)
    padded.narrow(dim + 1, 0, blocks.shape[dim + 1]).copy_(blocks)
    return padded.flatten(dim, dim + 2)


def _unpad(tensor: torch.Tensor, dim: int, outer: int, inner: int, real: int) -> torch.Tensor:
    """The real positions of a padded dim of layout ``(outer, inner)``."""
    if outer == 1:
        return tensor.narrow(dim, 0, inner * real)
    blocks = tensor.unflatten(dim, (outer, -1, inner)).narrow(dim + 1, 0, real)
    return blocks.flatten(dim, dim + 2)


def plan_buckets(graph_module: torch.fx.GraphModule) -> BucketPlan | None:
    """The bucket plan of a graph with symbolic size inputs (None without any); a size it
    refuses is in ``refusals``, with the reason, and not padded."""
    placeholders = list(graph_module.graph.find_nodes(op="placeholder"))
    symbols = {i: expr(p.meta["val"]) for i, p in enumerate(placeholders)
               if isinstance(p.meta.get("val"), torch.SymInt)
               and isinstance(expr(p.meta["val"]), sympy.Symbol)}
    if not symbols:
        return None
    graph_module = torch.fx.GraphModule(graph_module, _copy_graph(graph_module.graph))
    placeholders = list(graph_module.graph.find_nodes(op="placeholder"))
    first = {s: p for p, s in reversed(list(symbols.items()))}  # (a size passed twice)
    refusals, edits, layouts = _analyse(graph_module.graph,
                                         {p: symbols[p] for p in sorted(first.values())})
    for placeholder in placeholders:  # (a size made of one it cannot know: 8*s0*s1)
        size = expr(placeholder.meta.get("val"))
        unknown = getattr(size, "free_symbols", set()) - set(symbols.values())
        for position, symbol in symbols.items():
            if unknown and symbol in size.free_symbols and position in edits:
                del edits[position]
                refusals[str(symbol)] = f"input {placeholder.name} is {size}, of unknown sizes"
    sizes = {p: s for p, s in symbols.items() if p in edits}
    size_inputs = {i: expr(p.meta["val"]) for i, p in enumerate(placeholders)
                   if isinstance(p.meta.get("val"), torch.SymInt)
                   and any(involves(p.meta["val"], s) for s in sizes.values())}
    (returned,) = graph_module.graph.find_nodes(op="output")[0].args
    returned = list(returned) if isinstance(returned, (list, tuple)) else [returned]
    plan = BucketPlan(graph_module, sizes, symbols, size_inputs,
                      _dims({p: layouts[p][1] for p in sizes}),
                      _dims({p: layouts[p][0] for p in sizes}),
                      {i: node.meta["val"] for i, node in enumerate(returned)
                       if isinstance(node, torch.fx.Node)
                       and isinstance(node.meta.get("val"), torch.SymInt)
                       and any(involves(node.meta["val"], s) for s in sizes.values())},
                      refusals)
    if sizes:
        _apply(graph_module, placeholders, sizes, edits)
    return plan


def _analyse(graph: torch.fx.Graph, symbols: dict[int, sympy.Symbol]
             ) -> tuple[dict, dict, dict]:
    """Each size's edits and output layouts, or why it is refused. A dim made of two
    sizes (a batch-first ``[B, s] -> [B*s]``) buckets one of them, the other compiled per
    value: the later one, if neither buckets alone (the sequence of a ``[B, s, W]``)."""
    refusals, edits, layouts = {}, {}, {}

    def attempt(position: int, fixed: frozenset) -> None:
        try:
            edits[position], *layouts[position] = analyse(graph, symbols[position], fixed)
            refusals.pop(str(symbols[position]), None)
        except Refused as refusal:
            refusals[str(symbols[position])] = str(refusal)

    for position in symbols:
        attempt(position, frozenset())
    for position in reversed([p for p in symbols if p not in edits]):
        attempt(position, frozenset(s for p, s in symbols.items()
                                    if p not in edits and p != position))
    return refusals, edits, layouts


def _copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    copy = torch.fx.Graph()
    output = copy.graph_copy(graph, {})
    copy.output(output)
    return copy


def _dims(layouts: dict[int, list[Layouts]]) -> dict[int, list[tuple[int, int, Any, Any]]]:
    """By input or output position, the (dim, size position, outer, inner) of its padded
    dims."""
    dims: dict[int, list[tuple[int, int, Any, Any]]] = {}
    for position, outputs in layouts.items():
        for index, output in enumerate(outputs):
            dims.setdefault(index, []).extend(
                (d, position, outer, inner) for d, (outer, inner) in sorted(output.items()))
    return {index: found for index, found in dims.items() if found}


def _apply(graph_module: torch.fx.GraphModule, placeholders: list[torch.fx.Node],
           sizes: dict[int, sympy.Symbol],
           edits: dict[int, list[tuple[torch.fx.Node, Edit]]]) -> None:
    """Add the masks: one new 0-d input per bucketed size, its real size, after the
    graph's own inputs, and each op's edits before it."""
    graph = graph_module.graph
    anchor = next(n for n in graph.nodes if n.op != "placeholder")
    for placeholder in placeholders:  # (all first, in order: a later one may feed a mask)
        anchor.prepend(placeholder)
    symbol_nodes = {expr(p.meta["val"]): p for p in placeholders
                    if isinstance(p.meta.get("val"), torch.SymInt)}
    real_sizes = {}
    with graph.inserting_after(placeholders[-1]):
        for position in reversed(list(sizes)):  # (each inserted right after the last input)
            real_sizes[position] = graph.placeholder(f"real_size_{sizes[position]}")
    for position, found in edits.items():
        masks = MaskBuilder(graph, placeholders[position], real_sizes[position], symbol_nodes)
        for node, edit in found:
            with graph.inserting_before(node):
                edit(masks, node)
    graph.lint()
    graph_module.recompile()
