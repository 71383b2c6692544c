"""Which ATen ops keep a bucket's padding apart from the real positions, and the masks that
make the others exact. The walk goes through the graph's ops in order, with the symbolic
shapes PyTorch recorded on each node, and follows each padded dim's layout (see
``ember.torch.bucket_masks``): a view that merges a padded dim with the dims before it
(nn.Linear's ``[B, s, W] -> [B*s, W]``) leaves the padding interleaved, and the ops after
it must keep to that layout until a view splits it back.

Kept as they are: elementwise ops on matching layouts, views and permutes, matmuls and
convolutions with the dim as a row or batch dim, reductions over other dims, cumsum along
it. Made exact by a select against the real size (a select, not a product, so that a NaN
or inf computed in the padding cannot leak): a sum or a matmul over the dim (its padding
zeroed), a max (-inf), a softmax over it (its padded keys -inf, so they weigh 0), a mean
(a masked sum over the real count), attention over a padded sequence (padded keys masked
out, padded queries made harmless), and the size used as a number in arithmetic (the real
size, not the bucket). Anything else refuses, naming the op, the user's line and why.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
import torch.fx

from ember.torch.bucket_masks import Layout, MaskBuilder
from ember.torch.source import node_source

aten = torch.ops.aten

Layouts = dict[int, "Layout | None"]  # a tensor's padded dims; None: one value along the dim
Edit = Callable[[MaskBuilder, torch.fx.Node], None]  # applied before ``node``


class Refused(Exception):
    """The op mixes the padded positions of a dim into real ones: no bucket for it."""


def expr(size: Any) -> Any:
    return size.node.expr if isinstance(size, (torch.SymInt, torch.SymFloat, torch.SymBool)) \
        else sympy.Integer(size) if isinstance(size, int) else None


def involves(value: Any, symbol: sympy.Symbol) -> bool:
    found = expr(value)
    return found is not None and symbol in getattr(found, "free_symbols", ())


def whole(value: Any, fixed: frozenset = frozenset()) -> bool:
    """Whether a count is a positive integer times sizes in ``fixed`` (sizes compiled for
    each value, not bucketed: the batch of a batch-first ``[B, s]``)."""
    coefficient, rest = sympy.sympify(value).as_coeff_Mul()
    if not (coefficient.is_Integer and coefficient > 0):
        return False
    return rest == 1 or rest.free_symbols <= fixed and all(
        base.is_Symbol and power.is_Integer and power > 0
        for base, power in rest.as_powers_dict().items())


def factor(size: Any, symbol: sympy.Symbol, fixed: frozenset = frozenset()) -> Any:
    """``c`` where a size is ``c * symbol`` (a dim of size ``s``, or one that a view merged
    with static dims, or with sizes in ``fixed``: then ``c`` is an expression), else None."""
    found = expr(size)
    if found is None or symbol not in getattr(found, "free_symbols", ()):
        return None
    ratio = sympy.simplify(found / symbol)
    if not whole(ratio, fixed):
        return None
    return int(ratio) if ratio.is_Integer else ratio


def _number(value: Any) -> Any:
    """An int where a count is one, else its expression."""
    value = sympy.sympify(value)
    return int(value) if value.is_Integer else value


def val(arg: Any) -> Any:
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def factors(value: Any, symbol: sympy.Symbol, fixed: frozenset = frozenset()
            ) -> dict[int, Any]:
    """The padded dims of a tensor (or an FX node holding one), by their factor."""
    value = val(value)
    if not isinstance(value, torch.Tensor):
        return {}
    found = ((d, factor(size, symbol, fixed)) for d, size in enumerate(value.shape))
    return {d: c for d, c in found if c is not None}


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of an FX value (a tensor, or lists and tuples of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors(item)]
    return []


def mixed(value: Any, symbol: sympy.Symbol, fixed: frozenset = frozenset()) -> list[Any]:
    """Sizes that involve ``symbol`` but are not a multiple of it (``s0 + 1``): padding
    ``s0`` would not leave the real positions of such a dim first."""
    return [size for t in tensors(value) for size in t.shape
            if involves(size, symbol) and factor(size, symbol, fixed) is None]


def _ndim(node: Any) -> int:
    return val(node).dim()


def _dims(dim: Any, ndim: int) -> list[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    return sorted({d % max(ndim, 1) for d in ([dim] if isinstance(dim, int) else dim)})


def _argument(node: torch.fx.Node, index: int, name: str, default: Any = None) -> Any:
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


class Open:
    """The layout of an input's padded dim, still to choose: the bucket pads the input as
    its first use needs (a saved ``[B*s, W]`` activation that the backward views as
    ``[B, s, W]`` is padded per batch row), real positions first if none needs one."""

    def __init__(self) -> None:
        self.layout: Any = None  # (a Layout once chosen, or another Open it joined)


def _value(layout: Any) -> Any:
    """A Layout, None (uniform) or an Open not chosen yet."""
    while isinstance(layout, Open) and layout.layout is not None:
        layout = layout.layout
    return layout


def unify(a: Any, b: Any, message: str) -> Any:
    """The one layout of two that must be alike (an Open takes the other)."""
    a, b = _value(a), _value(b)
    if a is None or a is b:
        return b
    if b is None:
        return a
    if isinstance(a, Open):
        a.layout = b
        return b
    if isinstance(b, Open):
        b.layout = a
        return a
    if a != b:
        raise Refused(message)
    return a


def _concrete(layout: Any, count: Any) -> Layout:
    layout = _value(layout)
    if isinstance(layout, Open):
        layout.layout = (1, count)
        return (1, count)
    return layout if layout is not None else (1, count)


class Walk:
    """The layouts of the padded dims of each node's value, for one symbol."""

    def __init__(self, symbol: sympy.Symbol, fixed: frozenset) -> None:
        self.symbol, self.fixed = symbol, fixed
        self._layouts: dict[torch.fx.Node, Any] = {}  # a Layouts, or a list for a tuple

    def factors(self, value: Any) -> dict[int, Any]:
        return factors(value, self.symbol, self.fixed)

    def mixed(self, value: Any) -> list[Any]:
        return mixed(value, self.symbol, self.fixed)

    def of(self, arg: Any) -> Layouts:
        if not isinstance(arg, torch.fx.Node):
            return {}
        found = self._layouts.get(arg)
        return found if isinstance(found, dict) else self.conventional(arg)

    def concrete(self, arg: Any, dim: int) -> Layout:
        return _concrete(self.of(arg).get(dim), self.factors(arg)[dim])

    def conventional(self, value: Any) -> Any:
        """The layout of an input as the bucket pads it: real positions first."""
        value = val(value)
        if isinstance(value, (list, tuple)):
            return [self.conventional(v) for v in value]
        return {d: (1, c) for d, c in self.factors(value).items()}

    def set(self, node: torch.fx.Node, layouts: Any) -> None:
        self._layouts[node] = layouts

    def known(self, node: torch.fx.Node) -> bool:
        return node in self._layouts

    def item(self, node: torch.fx.Node) -> None:
        """A getitem's layouts: its item of the tuple's."""
        parent = self._layouts.get(node.args[0])
        if isinstance(parent, list) and isinstance(node.args[1], int):
            self._layouts[node] = parent[node.args[1]]

    def merged(self, node: torch.fx.Node) -> bool:
        """Whether an input holds a padded dim merged with the dims before it."""
        return any(self.concrete(arg, d)[0] != 1
                   for arg in node.all_input_nodes for d in self.of(arg))


# --- edits -------------------------------------------------------------------------------

def _fill(index: int, dim: int, layout: Layout, value: float) -> Edit:
    def edit(masks: MaskBuilder, node: torch.fx.Node) -> None:
        node.update_arg(index, masks.fill(node.args[index], dim, layout, value))
    return edit


def _fills(walk: Walk, node: torch.fx.Node, index: int, dims: Sequence[int],
           value: float) -> list[Edit]:
    arg = node.args[index]
    padded = walk.factors(arg)
    return [_fill(index, d, walk.concrete(arg, d), value) for d in dims if d in padded]


# --- the rules: each returns its edits (and sets the node's layouts) or raises Refused ----

def _combine(walk: Walk, node: torch.fx.Node, args: Sequence[Any]) -> Layouts:
    """Broadcasting: each padded dim's layout, which the arguments must agree on."""
    ndim = _ndim(node)
    result: Layouts = {}
    for arg in args:
        if not isinstance(val(arg), torch.Tensor):
            continue
        offset = ndim - _ndim(arg)
        for d, layout in walk.of(arg).items():
            result[d + offset] = unify(result.get(d + offset), layout,
                                       "it combines a padded dim that a view merged with "
                                       "others with one that it did not")
    for d in walk.factors(node):
        result.setdefault(d, None)
    return result


def _pointwise(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    walk.set(node, _combine(walk, node, node.args))
    return []


def _moved(node: torch.fx.Node, walk: Walk, source_dims: Sequence[int | None]) -> list[Edit]:
    """An op whose output dim ``i`` is its input's dim ``source_dims[i]`` (None: new)."""
    source = walk.of(node.args[0])
    layouts = {i: source.get(d) for i, d in enumerate(source_dims) if d is not None}
    walk.set(node, {d: layouts.get(d) for d in walk.factors(node)})
    return []


def _reorder(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    n = _ndim(node.args[0])
    target = node.target
    dims: list[int | None] = list(range(n))
    if target is aten.permute.default:
        dims = [d % n for d in node.args[1]]
    elif target in (aten.t.default, aten.transpose.int) and n >= 2:
        a, b = (0, 1) if target is aten.t.default else (node.args[1] % n, node.args[2] % n)
        dims[a], dims[b] = dims[b], dims[a]
    elif target is aten.unsqueeze.default:
        dims.insert(node.args[1] % (n + 1), None)
    elif target in (aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default):
        shape = val(node.args[0]).shape
        asked = set(range(n)) if target is aten.squeeze.default else set(_dims(node.args[1], n))
        dims = [d for d in dims if not (d in asked and expr(shape[d]) == 1)]
    elif target is aten.expand.default:
        shape = val(node.args[0]).shape
        lead = _ndim(node) - n
        dims = [None] * lead + [d if expr(shape[d]) != 1 else None for d in range(n)]
    return _moved(node, walk, dims)


def _uniform(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """A tensor of one value (full, empty): any layout will do."""
    walk.set(node, dict.fromkeys(walk.factors(node)))
    return []


def _no_tensor(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """A size or stride: a number (its uses are checked), not a tensor."""
    walk.set(node, {})
    return []


def _arange(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    if len(node.args) > 1 and involves(val(node.args[0]), walk.symbol):
        raise Refused("it starts at the size")
    return []


def _view(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """A view keeps each padded dim's slices together: it may merge the dim with others
    (the layout then says where the padding is) if the elements before each padded dim
    stay as many, else (``[2, s] -> [s, 2]``) it would mix the padding with real ones."""
    source, target = node.args[0], node
    sources, targets = sorted(walk.factors(source).items()), sorted(walk.factors(target).items())
    if len(sources) != len(targets):
        raise Refused("it interleaves the padding of the dim with real positions")
    layouts: Layouts = {}
    for (ds, cs), (dt, ct) in zip(sources, targets):
        ahead_source = sympy.Mul(*[expr(n) for n in val(source).shape[:ds]])
        ahead_target = sympy.Mul(*[expr(n) for n in val(target).shape[:dt]])
        chosen = _value(walk.of(source).get(ds))
        if isinstance(chosen, Open):  # (an input padded so that the view unmerges it)
            outer = sympy.simplify(ahead_target / ahead_source)
            if whole(outer, walk.fixed) and whole(sympy.simplify(cs / outer), walk.fixed):
                chosen.layout = (_number(outer), _number(sympy.simplify(cs / outer)))
        elements = ahead_source * walk.concrete(source, ds)[0]
        outer = sympy.simplify(elements / ahead_target)
        inner = sympy.simplify(ct / outer)
        if not (whole(outer, walk.fixed) and whole(inner, walk.fixed)):
            raise Refused("it interleaves the padding of the dim with real positions")
        layouts[dt] = (_number(outer), _number(inner))
    walk.set(node, layouts)
    return []


def _slice(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    x, dim, start, _end, step = (list(node.args) + [0, None, None, 1])[:5]
    dim %= _ndim(x)
    layouts = dict(walk.of(x))
    if dim in layouts:
        if not (start in (None, 0) and step == 1 and dim in walk.factors(node)
                and walk.concrete(x, dim)[0] == 1):
            raise Refused("it slices part of the padded dim")
        layouts[dim] = (1, walk.factors(node)[dim])
    walk.set(node, layouts)
    return []


def _cat(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    dim = _argument(node, 1, "dim", 0) % _ndim(node)
    if dim in walk.factors(node):
        raise Refused("it joins tensors along the padded dim")
    walk.set(node, _combine(walk, node, node.args[0]))
    return []


def _along(message: str, dim_index: int = 1, default: Any = None
           ) -> Callable[[torch.fx.Node, Walk], list[Edit]]:
    """Ops that must not work along the padded dim (their output's dims as the input's,
    less a selected one)."""
    def rule(node: torch.fx.Node, walk: Walk) -> list[Edit]:
        x = node.args[0]
        dims = _dims(_argument(node, dim_index, "dim", default), _ndim(x))
        layouts = walk.of(x)
        if set(dims) & set(layouts):
            raise Refused(message)
        if node.target is aten.select.int:
            walk.set(node, {d - (d > dims[0]): layout for d, layout in layouts.items()})
        elif isinstance(val(node), (list, tuple)):
            walk.set(node, [dict(layouts) for _ in val(node)])
        else:
            walk.set(node, dict(layouts))
        return []
    return rule


def _reduced(layouts: Layouts, dims: Sequence[int], keepdim: bool) -> Layouts:
    if keepdim:
        return {d: layout for d, layout in layouts.items() if d not in dims}
    return {d - sum(r < d for r in dims): layout for d, layout in layouts.items()
            if d not in dims}


def _reduction(fill: float | None, message: str = "it reduces over the padded dim",
               indexes: bool = False) -> Callable[[torch.fx.Node, Walk], list[Edit]]:
    """A reduction whose padding is replaced by ``fill`` (0 for a sum, -inf for a max),
    the value that leaves it unchanged; ``indexes``: it returns positions along the dim,
    which must count the real ones first."""
    def rule(node: torch.fx.Node, walk: Walk) -> list[Edit]:
        x = node.args[0]
        given = _argument(node, 1, "dim")
        dims = _dims(given, _ndim(x))
        keepdim = bool(_argument(node, 2, "keepdim", False))
        layouts = walk.of(x)
        padded = [d for d in dims if d in layouts]
        if padded and (fill is None or indexes and (
                given is None or any(walk.concrete(x, d)[0] != 1 for d in padded))):
            raise Refused(message)
        out = _reduced(layouts, dims, keepdim)
        walk.set(node, [out, out] if isinstance(val(node), (list, tuple)) else out)
        return _fills(walk, node, 0, padded, fill) if padded else []
    return rule


def _mean(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """A sum of the real positions over their count (the padding would count in the
    divisor)."""
    x = node.args[0]
    dims = _dims(_argument(node, 1, "dim"), _ndim(x))
    keepdim = bool(_argument(node, 2, "keepdim", False))
    layouts = walk.of(x)
    walk.set(node, _reduced(layouts, dims, keepdim))
    padded = [d for d in dims if d in layouts]
    if not padded:
        return []
    shape = val(x).shape
    static = 1
    for d in dims:
        if d in layouts:
            static *= walk.factors(x)[d]
        elif not whole(expr(shape[d]), walk.fixed):
            raise Refused(f"it averages over a dim of size {shape[d]}, which is bucketed too")
        else:
            static *= expr(shape[d])
    fills = _fills(walk, node, 0, padded, 0.0)

    def edit(masks: MaskBuilder, node: torch.fx.Node) -> None:
        for fill in fills:
            fill(masks, node)
        total = masks.call(aten.sum.dim_IntList, node.args[0], dims, keepdim,
                           dtype=node.kwargs.get("dtype"))
        count = masks.real_size
        for _ in padded[1:]:
            count = masks.call(aten.mul.Tensor, count, masks.real_size)
        count = masks.call(aten.mul.Tensor, count, masks.value(static))
        mean = masks.call(aten.div.Tensor, total, count)
        mean.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(mean)
        node.graph.erase_node(node)
    return [edit]


def _cumulative(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """A prefix along the dim: the padding comes after the real positions, if unmerged."""
    x, dim = node.args[0], node.args[1] % max(_ndim(node.args[0]), 1)
    if dim in walk.of(x) and walk.concrete(x, dim)[0] != 1:
        raise Refused("it accumulates along a padded dim merged with others")
    walk.set(node, dict(walk.of(x)))
    return []


def _softmax(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """Padded keys at -inf weigh 0 (a row of padding only is a padded row, sliced off)."""
    x = node.args[0]
    walk.set(node, dict(walk.of(x)))
    return _fills(walk, node, 0, [node.args[1] % _ndim(x)], float("-inf"))


def _matmul(first: int) -> Callable[[torch.fx.Node, Walk], list[Edit]]:
    """mm / bmm (``first`` = 0) and addmm (1): a padded contracting dim is zeroed in both
    operands, which must pad it alike; rows, columns and batches stay apart."""
    def rule(node: torch.fx.Node, walk: Walk) -> list[Edit]:
        x, y = node.args[first], node.args[first + 1]
        n = _ndim(x)
        lx, ly = walk.of(x), walk.of(y)
        edits: list[Edit] = []
        if n - 1 in lx:
            layout = _concrete(unify(lx[n - 1], ly.get(n - 2), "it contracts a padded dim "
                                     "that its operands pad differently"),
                               walk.factors(x)[n - 1])
            edits = [_fill(first, n - 1, layout, 0.0), _fill(first + 1, n - 2, layout, 0.0)]
        out: Layouts = {}
        if n == 3 and (0 in lx or 0 in ly):
            out[0] = unify(lx.get(0), ly.get(0), "it pairs batches that its operands pad "
                           "differently")
        if n - 2 in lx:
            out[n - 2] = lx[n - 2]
        if n - 1 in ly:
            out[n - 1] = ly[n - 1]
        if first:  # (addmm's bias, broadcast)
            bias = walk.of(node.args[0])
            offset = 2 - _ndim(node.args[0])
            for d, layout in bias.items():
                out[d + offset] = unify(out.get(d + offset), layout,
                                        "it adds a bias that pads the dim differently")
        walk.set(node, out)
        return edits
    return rule


def _leading_only(count: int, message: str, masked: Sequence[int] = ()
                  ) -> Callable[[torch.fx.Node, Walk], list[Edit]]:
    """Ops that keep the first ``count`` dims of their tensor arguments apart (a batch or
    channel dim), other dims of size ``s`` refused; ``masked`` arguments are zeroed where
    the op sums over the batch (a convolution's weight gradient)."""
    def rule(node: torch.fx.Node, walk: Walk) -> list[Edit]:
        edits = []
        for index, arg in enumerate(node.args):
            if not isinstance(val(arg), torch.Tensor):
                continue
            dims = walk.factors(arg)
            leading = set(range(count if count >= 0 else max(_ndim(arg) + count, 0)))
            if set(dims) - leading:
                raise Refused(message)
            if index in masked:
                edits += _fills(walk, node, index, sorted(dims), 0.0)
        return edits
    return rule


def _layer_norm(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    x, normalized = node.args[0], node.args[1]
    layouts = walk.of(x)
    if set(range(_ndim(x) - len(normalized), _ndim(x))) & set(layouts):
        raise Refused("it normalizes over the padded dim")
    walk.set(node, [dict(layouts) for _ in range(3)])
    return []


def _batch_norm(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    training = node.target is aten._native_batch_norm_legit_functional.default and node.args[5]
    dims = set(walk.factors(node.args[0]))
    if (dims - {1} if training else dims & {1}):
        raise Refused("its batch statistics would count the padding")
    return []


def _embedding(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    if walk.factors(node.args[0]):  # (padded indices are 0s: a real row, sliced off)
        raise Refused("it looks up rows of a padded table")
    walk.set(node, dict(walk.of(node.args[1])))
    return []


def _key_mask(padded_q: bool, padded_k: bool, dtype: torch.dtype | None) -> Edit:
    """The attention's mask made to keep real queries off the padded keys, and padded
    queries (their rows sliced off) on every key, so that none is masked through."""
    def edit(masks: MaskBuilder, node: torch.fx.Node) -> None:
        user = node.kwargs.get("attn_mask")
        real_q = masks.inside(2, 4, (1, 1)) if padded_q else None
        real_k = masks.inside(3, 4, (1, 1)) if padded_k else None
        if user is not None and dtype != torch.bool:  # (added to the scores)
            if real_q is not None:
                user = masks.call(aten.where.self, real_q, user, masks.call(
                    aten.scalar_tensor.default, 0.0, dtype=dtype))
            if real_k is not None:
                keep = real_k if real_q is None else masks.call(
                    aten.logical_or.default, real_k, masks.call(aten.logical_not.default, real_q))
                user = masks.call(aten.where.self, keep, user, masks.call(
                    aten.scalar_tensor.default, float("-inf"), dtype=dtype))
        else:
            keep = real_k if user is None else user if real_k is None else \
                masks.call(aten.logical_and.default, user, real_k)
            if real_q is not None:
                padded_rows = masks.call(aten.logical_not.default, real_q)
                keep = padded_rows if keep is None else \
                    masks.call(aten.logical_or.default, keep, padded_rows)
            user = keep
        node.update_kwarg("attn_mask", user)
    return edit


def _attention(backward: bool) -> Callable[[torch.fx.Node, Walk], list[Edit]]:
    """Scaled dot-product attention over ``[batch, heads, length, width]``, batch, heads
    and the sequence padded. The padding of the queries, keys, values (and the output's
    gradient) is zeroed, so that it is finite. A causal mask over a sequence padded alike
    for queries and keys keeps every real query off the padded keys (they come after it),
    and a padded query only sees real keys or finite padding, whose gradient is zero;
    else the attention's mask is made to (``_key_mask``)."""
    def rule(node: torch.fx.Node, walk: Walk) -> list[Edit]:
        q, k, v = (node.args[i - 1 + backward] for i in (1, 2, 3))
        causal = _argument(node, 7 if backward else 4, "is_causal", False)
        edits: list[Edit] = []
        for index in (0, 1, 2, 3) if backward else (0, 1, 2):
            arg = node.args[index]
            layouts = walk.of(arg)
            if _ndim(arg) != 4 or 3 in layouts:
                raise Refused("it attends over a padded width")
            if 2 in layouts and walk.concrete(arg, 2) != (1, 1):
                raise Refused("it attends over a sequence merged with other dims")
            edits += _fills(walk, node, index, [2], 0.0)
        mask = node.kwargs.get("attn_mask")
        for d, layout in walk.of(mask).items():
            if d >= _ndim(mask) - 2 and walk.concrete(mask, d) != (1, 1):
                raise Refused("its mask pads the sequence unlike the queries and keys")
        padded_q, padded_k = 2 in walk.of(q), 2 in walk.of(k)
        if padded_k and not (causal and padded_q and mask is None) or \
                padded_q and mask is not None:
            edits.append(_key_mask(padded_q, padded_k, val(mask).dtype if mask is not None
                                   else None))
        lq, lk, lv = walk.of(q), walk.of(k), walk.of(v)
        for d in (0, 1):
            unify(unify(lq.get(d), lk.get(d), "it pairs batches that its operands pad "
                        "differently"), lv.get(d), "it pairs batches that its operands pad "
                  "differently")
        if backward:
            walk.set(node, [dict(lq), dict(lk), dict(lv)])
        else:
            walk.set(node, [dict(lq), {d: lq[d] for d in lq if d < 3}])
        return edits
    return rule


_Rule = Callable[[torch.fx.Node, Walk], list[Edit]]
_RULES: dict[Any, _Rule] = {
    **dict.fromkeys([aten.view.default, aten._unsafe_view.default, aten.reshape.default], _view),
    **dict.fromkeys([aten.permute.default, aten.t.default, aten.transpose.int,
                     aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
                     aten.squeeze.default, aten.expand.default, aten.alias.default,
                     aten.clone.default, aten.lift_fresh_copy.default,
                     aten._to_copy.default], _reorder),
    aten.copy.default: _pointwise,
    **dict.fromkeys([aten.full.default, aten.scalar_tensor.default, aten.full_like.default,
                     aten.empty.memory_format, aten.empty_permuted.default], _uniform),
    **dict.fromkeys([aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int],
                    _no_tensor),
    **dict.fromkeys([aten.arange.start_step, aten.arange.start, aten.arange.default], _arange),
    aten.slice.Tensor: _slice,
    aten.cat.default: _cat,
    aten.select.int: _along("it picks one position of the padded dim"),
    aten.split.Tensor: _along("it splits the padded dim", 2, 0),
    aten.split_with_sizes.default: _along("it splits the padded dim", 2, 0),
    aten.flip.default: _along("it reverses the padded dim"),
    aten.embedding.default: _embedding,
    **dict.fromkeys([aten.sum.dim_IntList, aten.sum.default], _reduction(0.0)),
    **dict.fromkeys([aten.cumsum.default, aten.cumprod.default], _cumulative),
    **dict.fromkeys([aten.mean.dim, aten.mean.default], _mean),
    aten.var.correction: _reduction(None, "its divisor would count the padding"),
    aten.amax.default: _reduction(float("-inf")),
    aten.amin.default: _reduction(float("inf")),
    **dict.fromkeys([aten.argmax.default, aten.max.dim], _reduction(
        float("-inf"), "it finds a position over all dims or a merged dim", indexes=True)),
    **dict.fromkeys([aten.argmin.default, aten.min.dim], _reduction(
        float("inf"), "it finds a position over all dims or a merged dim", indexes=True)),
    **dict.fromkeys([aten.prod.default, aten.prod.dim_int], _reduction(1.0)),
    **dict.fromkeys([aten.any.dim, aten.any.dims, aten.any.default], _reduction(0.0)),
    **dict.fromkeys([aten.all.dim, aten.all.dims, aten.all.default], _reduction(1.0)),
    **dict.fromkeys([aten._softmax.default, aten._log_softmax.default], _softmax),
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
    aten._scaled_dot_product_flash_attention_for_cpu.default: _attention(backward=False),
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: _attention(backward=True),
}
# The argument that is the output's shape (or its extent), which may hold the symbolic size.
_SIZE_ARGUMENT = {**dict.fromkeys([aten.view.default, aten._unsafe_view.default,
                                   aten.reshape.default, aten.expand.default,
                                   aten.arange.start_step, aten.arange.start], 1),
                  **dict.fromkeys([aten.full.default, aten.empty.memory_format,
                                   aten.empty_permuted.default, aten.arange.default], 0),
                  aten.slice.Tensor: 3}


def _pointwise_op(target: Any) -> bool:
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags \
        and torch.Tag.nondeterministic_seeded not in target.tags


def _rule(target: Any) -> _Rule | None:
    return _RULES.get(target) or (_pointwise if _pointwise_op(target) else None)


def arithmetic(number: Any, symbol: sympy.Symbol, fixed: frozenset) -> bool:
    """Whether a number is sums, products and powers of the size, constants, and sizes
    compiled per value (integer powers of those)."""
    number = sympy.sympify(number)
    if number.is_Number:
        return True
    if number.is_Symbol:
        return number == symbol or number in fixed
    if number.is_Pow:
        return number.exp.is_Number and arithmetic(number.base, symbol, fixed) and (
            symbol in number.base.free_symbols or number.exp.is_Integer)
    return bool(number.is_Add or number.is_Mul) and all(
        arithmetic(term, symbol, fixed) for term in number.args)


def _real_value(index: int, number: Any, symbol: sympy.Symbol, integral: bool,
                target: Any) -> Edit:
    def edit(masks: MaskBuilder, node: torch.fx.Node) -> None:
        node.update_arg(index, masks.real_value(number, symbol, integral))
        node.target = target
    return edit


def _numbers(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """Where arithmetic uses the size as a number (a mean's gradient divides by it): the
    real size in its place, as a 0-d tensor, else Refused."""
    size_argument = _SIZE_ARGUMENT.get(node.target)
    symbol = walk.symbol
    edits = []
    for index, arg in enumerate(node.args):
        found: list[torch.fx.Node] = []
        torch.fx.node.map_arg(arg, found.append)
        if index == size_argument or not any(
                involves(val(n), symbol) for n in found if not isinstance(val(n), torch.Tensor)):
            continue
        number = expr(val(arg)) if isinstance(arg, torch.fx.Node) else None
        target = node.target
        if target.overloadpacket is not None and target._overloadname == "Scalar":
            target = getattr(target.overloadpacket, "Tensor", None)
        if number is None or not arithmetic(number, symbol, walk.fixed) or target is None \
                or not _pointwise_op(node.target):
            raise Refused("it uses the size as a number")
        edits.append(_real_value(index, number, symbol, isinstance(val(arg), torch.SymInt),
                                 target))
    found = []
    torch.fx.node.map_arg(list(node.kwargs.values()), found.append)
    if any(involves(val(n), symbol) for n in found if not isinstance(val(n), torch.Tensor)):
        raise Refused("it uses the size as a number")
    return edits


def _check(node: torch.fx.Node, walk: Walk) -> list[Edit]:
    """The edits ``node`` needs for the symbol's padding, or Refused."""
    if not isinstance(node.target, torch._ops.OpOverload):
        walk.item(node)  # (getitem; arithmetic on sizes: the ops around them are checked)
        return []
    if walk.mixed(node.meta.get("val")):
        raise Refused(f"it makes a dim of size {walk.mixed(node.meta['val'])[0]}")
    edits = _numbers(node, walk)
    touches = walk.factors(node) or any(walk.factors(a) for a in node.all_input_nodes)
    if not touches:
        return edits
    rule = _rule(node.target)
    if rule is None:
        raise Refused("Ember has no bucket rule for it")
    edits += rule(node, walk)
    if not walk.known(node):
        if walk.merged(node):
            raise Refused("it takes a padded dim that a view merged with others, which "
                          "Ember has no rule to keep apart for it")
        walk.set(node, walk.conventional(node))
    return edits


def analyse(graph: torch.fx.Graph, symbol: sympy.Symbol, fixed: frozenset = frozenset()
            ) -> tuple[list[tuple[torch.fx.Node, Edit]], list[Layouts], list[Layouts]]:
    """Every op's edits for ``symbol``, and the layouts of the graph's outputs and
    inputs, or Refused naming the first op that mixes the padding into real positions."""
    walk = Walk(symbol, fixed)
    found = []
    for node in graph.nodes:
        if node.op == "placeholder" and walk.mixed(node.meta.get("val")):
            raise Refused(f"input {node.name} has a dim of size "
                          f"{walk.mixed(node.meta['val'])[0]}")
        if node.op == "placeholder":  # (1: one layout only; else chosen by its uses)
            walk.set(node, {d: (1, 1) if c == 1 else Open() for d, c in walk.factors(node).items()})
        if node.op != "call_function":
            continue
        try:
            found += [(node, edit) for edit in _check(node, walk)]
        except Refused as refusal:
            where = node_source(node)
            raise Refused(f"{node.target} ({node.name}{', ' + where if where else ''}) "
                          f"{refusal}") from None
    (returned,) = graph.find_nodes(op="output")[0].args
    returned = list(returned) if isinstance(returned, (list, tuple)) else [returned]
    outputs = [{d: walk.concrete(n, d) for d in walk.of(n)} for n in returned]
    inputs = [{d: walk.concrete(n, d) for d in walk.of(n)}
              for n in graph.find_nodes(op="placeholder")]
    return found, outputs, inputs
