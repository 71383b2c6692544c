"""The graph nodes that keep a bucket's padding out of the real results: which positions of
a padded dim are real (against the real size, a 0-d input of the graph, so every size in a
bucket runs the same program), an operand with its padding replaced by a value, and the
real size as a number.

A padded dim of size ``outer * s * inner`` (its layout: ``(outer, inner)``) holds, in
row-major order, ``outer`` blocks of the bucket ``S`` slices of ``inner`` positions each;
a position is real when its slice index is below the real size. A dim the user made of
size ``s`` has the layout ``(1, 1)``; ``[s, 8] -> [8*s]`` makes ``(1, 8)``, and a batch-first
``[B, s, W] -> [B*s, W]`` (nn.Linear's flatten) makes ``(B, 1)``, real rows interleaved
with padding. ``outer`` and ``inner`` are ints, or expressions of sizes that are not
bucketed (compiled per value), such as a dynamic batch's.
"""
from __future__ import annotations

import operator
from typing import Any

import sympy
import torch
import torch.fx

aten = torch.ops.aten

Layout = tuple[Any, Any]  # (outer, inner) of a padded dim of size outer * s * inner


class MaskBuilder:
    """Adds mask nodes to ``graph`` for one bucketed size: ``size`` is its placeholder
    (the bucket, when the graph runs), ``real_size`` the 0-d int64 real size, and
    ``sizes`` the placeholders of every symbolic size (for layouts made of them)."""

    def __init__(self, graph: torch.fx.Graph, size: torch.fx.Node, real_size: torch.fx.Node,
                 sizes: dict[sympy.Symbol, torch.fx.Node]) -> None:
        self.graph, self.size, self.real_size, self.sizes = graph, size, real_size, sizes

    def call(self, target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        return self.graph.call_function(target, args, kwargs)

    def value(self, count: Any) -> Any:
        """A count as a graph value: an int, or the product of size placeholders."""
        count = sympy.sympify(count)
        if count.is_Integer:
            return int(count)
        coefficient, rest = count.as_coeff_Mul()
        result: Any = int(coefficient)
        for base, power in rest.as_powers_dict().items():
            for _ in range(int(power)):
                result = self.call(operator.mul, result, self.sizes[base])
        return result

    def inside(self, dim: int, ndim: int, layout: Layout) -> torch.fx.Node:
        """A bool tensor of ``ndim`` dims, broadcastable along the padded ``dim``: true at
        its real positions."""
        outer, inner = self.value(layout[0]), self.value(layout[1])
        if outer == 1:  # (real positions first: i < inner * real size)
            extent = self.call(operator.mul, self.size, inner)
            positions = self.call(aten.arange.start_step, 0, extent, dtype=torch.int64)
            inside = self.call(aten.lt.Tensor, positions, self.real_number(inner))
        else:  # (outer blocks of the bucket's slices: real where the slice is)
            slices = self.call(aten.arange.start_step, 0, self.size, dtype=torch.int64)
            inside = self.call(aten.lt.Tensor, slices, self.real_size)
            inside = self.call(aten.view.default, inside, [1, self.size, 1])
            inside = self.call(aten.expand.default, inside, [outer, self.size, inner])
            extent = self.call(operator.mul, self.call(operator.mul, self.size, outer), inner)
            inside = self.call(aten.reshape.default, inside, [extent])
        shape: list[Any] = [1] * ndim
        shape[dim] = extent
        return self.call(aten.view.default, inside, shape)

    def fill(self, operand: torch.fx.Node, dim: int, layout: Layout,
             value: float) -> torch.fx.Node:
        """``operand`` with the padding of ``dim`` replaced by ``value`` (a select, not a
        product, so that a NaN or inf computed there cannot leak)."""
        tensor = operand.meta["val"]
        inside = self.inside(dim, tensor.dim(), layout)
        if not tensor.dtype.is_floating_point and value in (float("inf"), float("-inf")):
            info = torch.iinfo(tensor.dtype) if tensor.dtype != torch.bool else None
            value = (info.max if value > 0 else info.min) if info else value > 0
        filler = self.call(aten.scalar_tensor.default, value, dtype=tensor.dtype)
        filled = self.call(aten.where.self, inside, operand, filler)
        filled.meta["val"] = tensor
        return filled

    def real_number(self, times: Any) -> Any:
        """``times`` the real size, a 0-d int64 tensor."""
        times = times if isinstance(times, torch.fx.Node) else self.value(times)
        return self.real_size if isinstance(times, int) and times == 1 else \
            self.call(aten.mul.Tensor, self.real_size, times)

    def real_value(self, number: Any, symbol: sympy.Symbol, integral: bool = False) -> Any:
        """A number made of the size (a mean's gradient divides by it), with the real size
        in place of the bucket: a 0-d float64 tensor (int64 where ``integral``: a SymInt).
        ``number`` is a sum, product or power (see ``bucket_rules.arithmetic``); other
        sizes in it are compiled per value, so they are numbers."""
        number = sympy.sympify(number)
        if symbol not in number.free_symbols:
            return self._number(number)
        if number == symbol:
            return self.real_size if integral else \
                self.call(aten._to_copy.default, self.real_size, dtype=torch.float64)
        if number.is_Pow:
            power = number.exp
            return self.call(aten.pow.Tensor_Scalar,
                             self.real_value(number.base, symbol, integral),
                             int(power) if power.is_Integer and power > 0 else float(power))
        combine = aten.add.Tensor if number.is_Add else aten.mul.Tensor
        terms = sorted(number.args, key=lambda term: symbol not in term.free_symbols)
        result = self.real_value(terms[0], symbol, integral)  # (a tensor first: the size)
        for term in terms[1:]:
            result = self.call(combine, result, self.real_value(term, symbol, integral))
        return result

    def _number(self, number: sympy.Expr) -> Any:
        """A number of other sizes, as Python arithmetic on their placeholders."""
        if number.is_Number:
            return int(number) if number.is_Integer else float(number)
        if number.is_Symbol:
            return self.sizes[number]
        if number.is_Pow:
            result: Any = 1
            for _ in range(abs(int(number.exp))):
                result = self.call(operator.mul, result, self._number(number.base))
            return result if number.exp > 0 else self.call(operator.truediv, 1.0, result)
        combine = operator.add if number.is_Add else operator.mul
        result = self._number(number.args[0])
        for term in number.args[1:]:
            result = self.call(combine, result, self._number(term))
        return result
