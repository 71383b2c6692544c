"""Shape buckets for ATen graphs with symbolic sizes (``dynamic=True`` / ``mark_dynamic``):
a size ``s`` runs padded up to its power-of-two bucket, so that the sizes 5 to 8 share one
compiled program, and the outputs are sliced back to ``s``.

Padding is correct only where the padded positions never mix into the real ones. The
analysis walks the graph's ops, with the symbolic shapes PyTorch recorded on each node, and
keeps a size bucketed only if every op keeps the dims of that size apart: elementwise ops,
views that keep the dim whole, matmuls and convolutions with it as a row or batch dim, and
reductions, softmaxes and normalizations over other dims. A sum or a matmul over the dim
(a weight's gradient, summed over the batch) is kept too: this module adds a select to the
graph that zeroes the operand's padded positions first (a select, not a product, so that a
NaN or inf computed there cannot leak). The real size reaches the graph as a 0-d input, so
every size in a bucket runs the same program.

Any other use of the dim (a mean, whose divisor would count the padding; a softmax or a max
over it; an index into it; the size used as a number) refuses the bucket for that size,
and the reason names the op and the user's line: the graph then compiles once per size.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
import operator
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx

from ember.torch.source import node_source

aten = torch.ops.aten
prims = torch.ops.prims

Masks = list[tuple[int, int]]  # (argument index, dim) pairs whose padding must be zeroed


class _Refused(Exception):
    """The op mixes the padded positions of a dim into real ones: no bucket for it."""


def bucket(size: int) -> int:
    """The power of two that ``size`` is padded up to."""
    return 1 << max(size - 1, 0).bit_length()


def _expr(size: Any) -> Any:
    return size.node.expr if isinstance(size, (torch.SymInt, torch.SymFloat, torch.SymBool)) \
        else sympy.Integer(size) if isinstance(size, int) else None


def _involves(value: Any, symbol: sympy.Symbol) -> bool:
    expr = _expr(value)
    return expr is not None and symbol in getattr(expr, "free_symbols", ())


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _factor(size: Any, symbol: sympy.Symbol) -> int | None:
    """``c`` where a size is ``c * symbol`` (a dim of size ``s``, or one that a view merged
    with static dims inside it), else None."""
    expr = _expr(size)
    if expr is None or symbol not in getattr(expr, "free_symbols", ()):
        return None
    factor = sympy.simplify(expr / symbol)
    return int(factor) if factor.is_Integer and factor > 0 else None


def _factors(value: Any, symbol: sympy.Symbol) -> dict[int, int]:
    """The padded dims of a tensor (or an FX node holding one), by their factor: dims of
    size ``c * symbol``, whose real positions come first and padding last."""
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return {}
    return {d: c for d, c in ((d, _factor(size, symbol)) for d, size in enumerate(value.shape))
            if c is not None}


def _padded(value: Any, symbol: sympy.Symbol) -> set[int]:
    return set(_factors(value, symbol))


def _mixed(value: Any, symbol: sympy.Symbol) -> list[Any]:
    """Sizes of a value that involve ``symbol`` but are not a multiple of it (``s0 + 1``):
    padding ``s0`` would not leave the real positions of such a dim first."""
    return [size for t in _tensors(value) for size in t.shape
            if _involves(size, symbol) and _factor(size, symbol) is None]


def _ndim(node: Any) -> int:
    return node.meta["val"].dim()


def _dims(dim: Any, ndim: int) -> set[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return set(range(ndim))
    return {d % max(ndim, 1) for d in ([dim] if isinstance(dim, int) else dim)}


# --- the rules: each returns the masks the op needs or raises _Refused -------------------

def _keeps_dims(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    return []


def _view(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    """A view keeps the padding of each padded dim last when the dims outside it hold as
    many elements before and after (``[s, 8, 32] -> [8*s, 32]``, not ``[2, s] -> [2*s]``,
    which would interleave the padding with the real rows)."""
    def outer_sizes(shape: Sequence[Any]) -> list[Any]:
        return [sympy.simplify(sympy.prod([_expr(n) for n in shape[:d]]))
                for d, n in enumerate(shape) if _involves(n, symbol)]

    source, target = node.args[0].meta["val"].shape, node.meta["val"].shape
    if outer_sizes(source) != outer_sizes(target):
        raise _Refused("it interleaves the padding of the dim with real positions")
    return []


def _slice(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    x, dim, start, _end, step = (list(node.args) + [0, None, None, 1])[:5]
    if dim % _ndim(x) in _padded(x, symbol) and not (
            start in (None, 0) and step == 1 and dim % _ndim(x) in _padded(node, symbol)):
        raise _Refused("it slices part of the padded dim")
    return []


def _cat(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    dim = _dim_argument(node) or 0
    if dim % _ndim(node) in _padded(node, symbol):
        raise _Refused("it joins tensors along the padded dim")
    return []


def _dim_argument(node: torch.fx.Node, index: int = 1) -> Any:
    """A reduction's dims (None for every dim)."""
    return node.args[index] if len(node.args) > index else node.kwargs.get("dim")


def _refuse_along(message: str, dim_argument: int = 1) -> Callable:
    def rule(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
        x = node.args[0]
        if _dims(_dim_argument(node, dim_argument), _ndim(x)) & _padded(x, symbol):
            raise _Refused(message)
        return []
    return rule


def _refuse_touching(message: str) -> Callable:
    def rule(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
        if _padded(node, symbol) or any(_padded(a, symbol) for a in node.all_input_nodes):
            raise _Refused(message)
        return []
    return rule


def _sum(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    x = node.args[0]
    return [(0, d) for d in sorted(_dims(_dim_argument(node), _ndim(x)) & _padded(x, symbol))]


def _matmul(first: int) -> Callable:
    """mm / bmm (``first`` = 0) and addmm (1): a padded contracting dim is zeroed in both
    operands; padded row, column and batch dims stay apart."""
    def rule(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
        x, y = node.args[first], node.args[first + 1]
        contracting = _ndim(x) - 1
        if contracting in _padded(x, symbol):
            return [(first, contracting), (first + 1, _ndim(y) - 2)]
        return []
    return rule


def _leading_only(count: int, message: str, masked: Sequence[int] = ()) -> Callable:
    """Ops that keep the first ``count`` dims of their tensor arguments apart (a batch or
    channel dim), other dims of size ``s`` refused; ``masked`` arguments are zeroed where
    the op sums over the batch (a convolution's weight gradient)."""
    def rule(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
        masks = []
        for index, arg in enumerate(node.args):
            if not isinstance(arg, torch.fx.Node) or not isinstance(arg.meta.get("val"),
                                                                    torch.Tensor):
                continue
            dims = _padded(arg, symbol)
            leading = set(range(count if count >= 0 else max(_ndim(arg) + count, 0)))
            if dims - leading:
                raise _Refused(message)
            if index in masked:
                masks += [(index, d) for d in sorted(dims)]
        return masks
    return rule


def _layer_norm(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    x, normalized = node.args[0], node.args[1]
    if set(range(_ndim(x) - len(normalized), _ndim(x))) & _padded(x, symbol):
        raise _Refused("it normalizes over the padded dim")
    return []


def _batch_norm(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    training = node.target is aten._native_batch_norm_legit_functional.default and node.args[5]
    dims = _padded(node.args[0], symbol)
    if (dims - {1} if training else dims & {1}):
        raise _Refused("its batch statistics would count the padding")
    return []


def _arange(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    if len(node.args) > 1 and _involves(_val(node.args[0]), symbol):
        raise _Refused("it starts at the size")
    return []


def _embedding(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    if _padded(node.args[0], symbol):  # (padded indices are 0s: a real row, sliced off later)
        raise _Refused("it looks up rows of a padded table")
    return []


def _val(arg: Any) -> Any:
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


_RULES: dict[Any, Callable[[torch.fx.Node, sympy.Symbol], Masks]] = {
    **dict.fromkeys([aten.view.default, aten._unsafe_view.default, aten.reshape.default], _view),
    **dict.fromkeys([aten.permute.default, aten.t.default, aten.transpose.int,
                     aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
                     aten.squeeze.default, aten.expand.default, aten.alias.default,
                     aten.clone.default, aten.lift_fresh_copy.default, aten._to_copy.default,
                     aten.copy.default, aten.full.default, aten.scalar_tensor.default,
                     aten.full_like.default, aten.empty.memory_format,
                     aten.empty_permuted.default, aten.sym_size.int,
                     aten.sym_numel.default, aten.sym_stride.int], _keeps_dims),
    **dict.fromkeys([aten.arange.start_step, aten.arange.start, aten.arange.default], _arange),
    aten.slice.Tensor: _slice,
    aten.cat.default: _cat,
    aten.select.int: _refuse_along("it picks one position of the padded dim"),
    aten.split.Tensor: _refuse_along("it splits the padded dim", 2),
    aten.split_with_sizes.default: _refuse_along("it splits the padded dim", 2),
    aten.flip.default: _refuse_along("it reverses the padded dim"),
    aten.constant_pad_nd.default: _refuse_touching("it pads a tensor with a padded dim"),
    aten.embedding.default: _embedding,
    **dict.fromkeys([aten.sum.dim_IntList, aten.sum.default], _sum),
    **dict.fromkeys([aten.cumsum.default, aten.cumprod.default], _keeps_dims),  # (prefixes)
    **dict.fromkeys([aten.mean.dim, aten.mean.default],
                    _refuse_along("its divisor would count the padding")),
    aten.var.correction: _refuse_along("its divisor would count the padding"),
    **dict.fromkeys([aten.amax.default, aten.amin.default, aten.max.dim, aten.min.dim,
                     aten.argmax.default, aten.argmin.default, aten.prod.default,
                     aten.prod.dim_int, aten.any.dim, aten.any.dims, aten.any.default,
                     aten.all.dim, aten.all.dims, aten.all.default],
                    _refuse_along("it reduces over the padded dim")),
    **dict.fromkeys([aten._softmax.default, aten._log_softmax.default],
                    _refuse_along("it normalizes over the padded dim")),
    **dict.fromkeys([aten.mm.default, aten.bmm.default], _matmul(0)),
    aten.addmm.default: _matmul(1),
    aten.convolution.default: _leading_only(1, "it convolves along the padded dim"),
    aten.convolution_backward.default: _leading_only(
        1, "it convolves along the padded dim", masked=(0, 1)),
    aten.native_layer_norm.default: _layer_norm,
    aten._native_batch_norm_legit_functional.default: _batch_norm,
    aten._native_batch_norm_legit_no_training.default: _batch_norm,
    **dict.fromkeys([aten.max_pool2d_with_indices.default,
                     aten.max_pool2d_with_indices_backward.default],
                    _leading_only(-2, "it pools along the padded dim")),
    **dict.fromkeys([aten._scaled_dot_product_flash_attention_for_cpu.default,
                     aten._scaled_dot_product_flash_attention_for_cpu_backward.default],
                    _leading_only(2, "it attends over the padded dim")),
}
# The argument that is the output's shape (or its extent), which may hold the symbolic size.
_SIZE_ARGUMENT = {**dict.fromkeys([aten.view.default, aten._unsafe_view.default,
                                   aten.reshape.default, aten.expand.default,
                                   aten.arange.start_step, aten.arange.start], 1),
                  **dict.fromkeys([aten.full.default, aten.empty.memory_format,
                                   aten.empty_permuted.default, aten.arange.default], 0),
                  aten.slice.Tensor: 3}


def _uses_size_as_number(node: torch.fx.Node, symbol: sympy.Symbol) -> bool:
    size_argument = _SIZE_ARGUMENT.get(node.target)
    others = [a for i, a in enumerate(node.args) if i != size_argument] + \
        list(node.kwargs.values())
    found: list[torch.fx.Node] = []
    torch.fx.node.map_arg(others, found.append)
    return any(_involves(_val(n), symbol) for n in found if not isinstance(_val(n), torch.Tensor))


def _rule(target: Any) -> Callable[[torch.fx.Node, sympy.Symbol], Masks] | None:
    if target in _RULES:
        return _RULES[target]
    if isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags \
            and torch.Tag.nondeterministic_seeded not in target.tags:
        return _keeps_dims
    return None


def _check(node: torch.fx.Node, symbol: sympy.Symbol) -> Masks:
    """The masks ``node`` needs for ``symbol``'s padding, or _Refused."""
    if not isinstance(node.target, torch._ops.OpOverload):
        return []  # (getitem, arithmetic on sizes: the ops around them are checked)
    if _mixed(node.meta.get("val"), symbol):
        raise _Refused(f"it makes a dim of size {_mixed(node.meta['val'], symbol)[0]}")
    if _uses_size_as_number(node, symbol):
        raise _Refused("it uses the size as a number")
    touches = _padded(node, symbol) or any(_padded(a, symbol) for a in node.all_input_nodes)
    if not touches:
        return []
    rule = _rule(node.target)
    if rule is None:
        raise _Refused("Ember has no bucket rule for it")
    return rule(node, symbol)


@dataclass
class BucketPlan:
    """How one graph runs padded: the size inputs it buckets (by position), the dims of
    the inputs and outputs to pad and slice back, and the graph with its masks added (it
    takes one 0-d int64 real size per bucketed size, after its own inputs)."""
    graph_module: torch.fx.GraphModule
    sizes: dict[int, sympy.Symbol]  # input position -> symbol, of the bucketed sizes
    symbols: dict[int, sympy.Symbol]  # ... of every size input that is a symbol
    size_inputs: dict[int, Any]  # input position -> the expression of a size of bucketed ones
    # input position -> (dim, size position, factor): the dim's size is factor * the size
    input_dims: dict[int, list[tuple[int, int, int]]]
    output_dims: dict[int, list[tuple[int, int, int]]]
    size_outputs: dict[int, Any]  # output position -> its symbolic value
    refusals: dict[str, str] = field(default_factory=dict)  # symbol -> why not bucketed

    def pad(self, inputs: Sequence[Any]) -> tuple[list[Any], list[torch.Tensor]]:
        """The inputs padded to their buckets (sizes replaced by their buckets), and the
        real sizes as 0-d tensors for the masks."""
        padded = list(inputs)
        values = {symbol: bucket(inputs[p]) if p in self.sizes else inputs[p]
                  for p, symbol in self.symbols.items()}
        for position, expr in self.size_inputs.items():  # (s0, and sizes made of it: 8*s0)
            padded[position] = int(expr.xreplace(values))
        for position, dims in self.input_dims.items():
            padded[position] = _pad(inputs[position], {d: c * padded[p] for d, p, c in dims})
        return padded, [torch.tensor(inputs[p], dtype=torch.int64) for p in self.sizes]

    def unpad(self, outputs: Any, inputs: Sequence[Any]) -> Any:
        """The outputs sliced back to the real sizes of ``inputs``."""
        if not isinstance(outputs, (list, tuple)):
            return outputs
        real = {symbol: inputs[p] for p, symbol in self.symbols.items()}
        result = list(outputs)
        for position, dims in self.output_dims.items():
            for dim, size_position, factor in dims:
                result[position] = result[position].narrow(dim, 0, factor * inputs[size_position])
        for position, value in self.size_outputs.items():
            result[position] = int(_expr(value).xreplace(real))
        return type(outputs)(result)

    def describe(self, inputs: Sequence[Any]) -> str:
        """``s0=5 in bucket 8``, for the log."""
        return ", ".join(f"{symbol}={inputs[p]} in bucket {bucket(inputs[p])}"
                         for p, symbol in self.sizes.items())


def _pad(tensor: torch.Tensor, sizes: dict[int, int]) -> torch.Tensor:
    shape = [sizes.get(d, n) for d, n in enumerate(tensor.shape)]
    if shape == list(tensor.shape):
        return tensor
    padded = tensor.new_zeros(shape)
    padded[tuple(slice(0, n) for n in tensor.shape)] = tensor
    return padded


def plan_buckets(graph_module: torch.fx.GraphModule) -> BucketPlan | None:
    """The bucket plan of a graph with symbolic size inputs (None without any); a size it
    refuses is in ``refusals``, with the reason, and not padded."""
    placeholders = list(graph_module.graph.find_nodes(op="placeholder"))
    symbols = {i: _expr(p.meta["val"]) for i, p in enumerate(placeholders)
               if isinstance(p.meta.get("val"), torch.SymInt)
               and isinstance(_expr(p.meta["val"]), sympy.Symbol)}
    if not symbols:
        return None
    graph_module = torch.fx.GraphModule(graph_module, _copy_graph(graph_module.graph))
    placeholders = list(graph_module.graph.find_nodes(op="placeholder"))
    refusals, masks = {}, {}
    for position, symbol in symbols.items():
        try:
            masks[position] = _analyse(graph_module.graph, symbol)
        except _Refused as refusal:
            refusals[str(symbol)] = str(refusal)
    for placeholder in placeholders:  # (a size made of one it cannot know: 8*s0*s1)
        expr = _expr(placeholder.meta.get("val"))
        unknown = getattr(expr, "free_symbols", set()) - set(symbols.values())
        for position, symbol in symbols.items():
            if unknown and symbol in expr.free_symbols and position in masks:
                del masks[position]
                refusals[str(symbol)] = f"input {placeholder.name} is {expr}, of unknown sizes"
    sizes = {p: s for p, s in symbols.items() if p in masks}
    size_inputs = {i: _expr(p.meta["val"]) for i, p in enumerate(placeholders)
                   if isinstance(p.meta.get("val"), torch.SymInt)
                   and any(_involves(p.meta["val"], s) for s in sizes.values())}
    (returned,) = graph_module.graph.find_nodes(op="output")[0].args
    returned = list(returned) if isinstance(returned, (list, tuple)) else [returned]
    plan = BucketPlan(graph_module, sizes, symbols, size_inputs,
                      _dims_by_position(placeholders, sizes), _dims_by_position(returned, sizes),
                      {i: node.meta["val"] for i, node in enumerate(returned)
                       if isinstance(node, torch.fx.Node)
                       and isinstance(node.meta.get("val"), torch.SymInt)
                       and any(_involves(node.meta["val"], s) for s in sizes.values())},
                      refusals)
    if sizes:
        _add_masks(graph_module, placeholders, sizes, masks)
    return plan


def _copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    copy = torch.fx.Graph()
    output = copy.graph_copy(graph, {})
    copy.output(output)
    return copy


def _analyse(graph: torch.fx.Graph, symbol: sympy.Symbol) -> list[tuple[torch.fx.Node, Masks]]:
    """Every op's masks for ``symbol``, or _Refused naming the first op that mixes it."""
    found = []
    for node in graph.nodes:
        if node.op == "placeholder" and _mixed(node.meta.get("val"), symbol):
            raise _Refused(f"input {node.name} has a dim of size "
                           f"{_mixed(node.meta['val'], symbol)[0]}")
        if node.op != "call_function":
            continue
        try:
            node_masks = _check(node, symbol)
        except _Refused as refusal:
            where = node_source(node)
            raise _Refused(f"{node.target} ({node.name}{', ' + where if where else ''}) "
                           f"{refusal}") from None
        if node_masks:
            found.append((node, node_masks))
    return found


def _dims_by_position(nodes: Sequence[Any], sizes: dict[int, sympy.Symbol]
                      ) -> dict[int, list[tuple[int, int, int]]]:
    dims = {}
    for index, node in enumerate(nodes):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        found = [(d, p, c) for p, s in sizes.items() for d, c in sorted(_factors(value, s).items())]
        if found:
            dims[index] = found
    return dims


def _add_masks(graph_module: torch.fx.GraphModule, placeholders: list[torch.fx.Node],
               sizes: dict[int, sympy.Symbol],
               masks: dict[int, list[tuple[torch.fx.Node, Masks]]]) -> None:
    """Zero the padded positions of each masked operand, by a select against the real
    size (a new 0-d input per bucketed size, after the graph's own inputs)."""
    graph = graph_module.graph
    anchor = next(n for n in graph.nodes if n.op != "placeholder")
    for placeholder in placeholders:  # (all first, in order: a later one may feed a mask)
        anchor.prepend(placeholder)
    real_sizes = {}
    with graph.inserting_after(placeholders[-1]):
        for position in reversed(list(sizes)):  # (each inserted right after the last input)
            real_sizes[position] = graph.placeholder(f"real_size_{sizes[position]}")
    for position, found in masks.items():
        for node, node_masks in found:
            for index, dim in node_masks:
                with graph.inserting_before(node):
                    operand = node.args[index]
                    masked = _masked(graph, operand, dim, placeholders[position],
                                     real_sizes[position])
                node.update_arg(index, masked)
    graph.lint()
    graph_module.recompile()


def _masked(graph: torch.fx.Graph, operand: torch.fx.Node, dim: int, size: torch.fx.Node,
            real_size: torch.fx.Node) -> torch.fx.Node:
    value = operand.meta["val"]
    factor = _factor(value.shape[dim], _expr(size.meta["val"]))
    extent = graph.call_function(operator.mul, (size, factor))
    shape: list[Any] = [1] * value.dim()
    shape[dim] = extent
    positions = graph.call_function(aten.arange.start_step, (0, extent), {"dtype": torch.int64})
    positions = graph.call_function(aten.view.default, (positions, shape))
    real_extent = graph.call_function(aten.mul.Tensor, (real_size, factor))
    inside = graph.call_function(aten.lt.Tensor, (positions, real_extent))
    zero = graph.call_function(aten.scalar_tensor.default, (0,), {"dtype": value.dtype})
    masked = graph.call_function(aten.where.self, (inside, operand, zero))
    masked.meta["val"] = value
    return masked
