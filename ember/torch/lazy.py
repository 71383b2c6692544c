"""The lazy-tensor device, PyTorch/XLA's model: tensors on it record their ATen ops into a
graph instead of running them, through a ``__torch_dispatch__`` subclass (no C++).

The graph is compiled by Ember and run when a value is needed (``.item()``, ``.cpu()``,
``print``, a Python ``if``) or at ``mark_step()``; either way every pending value of the
live lazy tensors runs in it. Each op goes through the same ATen ->
Ember table as ``torch.compile`` (``ember.torch.lowerings``), and graphs are cached by a
structural hash (ops, constants, input shapes and dtypes), so a training loop compiles once
and hits the cache every step after.

PyTorch's ``.to(device)`` cannot target a device defined in Python, so a tensor or module
moves onto this device with ``to_lazy(x)`` (a module's parameters and buffers in place) and
back with ``.cpu()``. In-place ops are recorded functionally: an in-place op rebinds the
tensor it updates (and its ``detach`` aliases), an update of a view is written into its
base (by the view op's scatter twin), and a view is made again when its base has changed
since, so views and bases agree as in eager PyTorch.

A Python float that scales a tensor (``mul``, ``div``, ``add``, ``sub``) is lifted into a
graph input, a 0-d tensor of the op's computation dtype, so its value is not part of the
structural key: ``torch.optim.AdamW``, whose step size and bias corrections are new Python
floats every step, compiles once. Other Python numbers (sizes, dims, ``clamp`` bounds, and
a float against only 0-d tensors, whose dtype it would decide) stay constants of the graph.

An op whose output's shape depends on its input's values (``nonzero``, ``unique``,
``masked_select``, indexing by a boolean mask) has no meta kernel to record it with: as in
PyTorch/XLA, the graph behind its inputs runs, and Ember's lowering of the op computes it
on the concrete arrays; its result is a concrete tensor on the device, which later ops
record on as on any input.
"""
from __future__ import annotations

import itertools
import operator
import os
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                           DynamicOutputShapeException)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ember.errors import EmberTypeError
from ember.torch import metadata_memo
from ember.torch.decompositions import core_aten_table
from ember.torch.graph_compiler import EmberGraphModule
from ember.torch.lowerings import LOWERINGS
from ember.torch.metadata_memo import memo
from ember.torch.metrics import metrics
from ember.torch.onednn import onednn_off
from ember.torch.stages import run_lowering

aten = torch.ops.aten

# Ops that return an alias of their input: no op recorded, the alias shares the binding.
_ALIASES = {aten.detach.default, aten.alias.default, aten.lift_fresh.default}
# Ops that need a concrete value: the graph behind their inputs runs first.
_MATERIALIZING = {aten._local_scalar_dense.default, aten.is_nonzero.default,
                  aten.equal.default}
# Ops that read only their input's metadata: run at once into concrete inputs, so that an
# optimizer's first step (which creates its state with zeros_like) has the structure of
# every later step, and the loop compiles once.
_METADATA_ONLY = {aten.full_like.default, aten.zeros_like.default, aten.ones_like.default,
                  aten.empty_like.default}
# Arithmetic whose Python-float operand becomes a graph input (see the module docstring),
# with the type promotion that decides its computation dtype.
_LIFTS_SCALARS = {aten.mul.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
                  aten.add.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
                  aten.sub.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
                  aten.div.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT}
# What a meta or fake kernel raises for an output whose shape depends on values. A plain
# NotImplementedError counts only for ops that ATen tags dynamic_output_shape: for others
# it means a missing meta kernel, not a data-dependent op.
_DATA_DEPENDENT_ERRORS = (DynamicOutputShapeException, DataDependentOutputException,
                          GuardOnDataDependentSymNode)
# The RNNs that PyTorch runs as one oneDNN kernel when oneDNN is on.
_RNNS = {torch._VF.lstm, torch._VF.gru, torch._VF.rnn_tanh, torch._VF.rnn_relu}
_serials = itertools.count()


@dataclass(eq=False)
class _Node:
    """One recorded ATen op; its arguments hold ``_Value``s where tensors were."""
    op: Any
    args: tuple
    kwargs: dict


@dataclass(eq=False)
class _Value:
    """A tensor's value: concrete ``data`` (a CPU tensor), or output ``index`` of a pending
    ``node`` (which becomes ``data`` once the graph has run)."""
    data: torch.Tensor | None = None
    node: _Node | None = None
    index: int | None = None
    serial: int = field(default_factory=lambda: next(_serials))


_cache: dict[tuple, EmberGraphModule] = {}
# The live lazy tensors by id (a WeakSet would compare tensors with ==, an op of its own).
_live: weakref.WeakValueDictionary[int, LazyTensor] = weakref.WeakValueDictionary()


def clear_cache() -> None:
    """Forget the compiled graphs, so the next graph of each structure compiles again,
    and the ops' output metadata, so each op's meta kernel runs again."""
    _cache.clear()
    metadata_memo.clear()


class LazyDevice:
    """The lazy device, for ``to_lazy(x, device)`` and reprs; ``torch.device`` itself only
    names devices compiled into PyTorch."""

    def __repr__(self) -> str:
        return "ember.torch.lazy.device()"


_DEVICE = LazyDevice()


def device() -> LazyDevice:
    """The lazy device (``xm.xla_device()`` in torch_xla)."""
    return _DEVICE


class LazyTensor(torch.Tensor):
    """A tensor whose ops are recorded, not run. Its metadata (shape, dtype, strides) is
    exact, computed by PyTorch's meta kernels. It has no storage, and it claims the CPU device
    (a wrapper cannot claim a device PyTorch does not know): the plain tensors PyTorch makes
    next to it (a scalar operand wrapped as a tensor) are then CPU tensors, which the graph
    takes as inputs."""

    _binding: list[_Value]  # [value]: shared by aliases (detach), rebound by in-place ops
    _view: _View | None = None  # how it was made from its base, if it is a view

    @staticmethod
    def __new__(cls, value: _Value, meta: torch.Tensor, requires_grad: bool = False):
        tensor = torch.Tensor._make_wrapper_subclass(
            cls, meta.shape, strides=meta.stride(), dtype=meta.dtype, device="cpu",
            requires_grad=requires_grad)
        tensor._binding = [value]
        _live[id(tensor)] = tensor
        return tensor

    @property
    def _value(self) -> _Value:
        return self._binding[0]

    @_value.setter
    def _value(self, value: _Value) -> None:
        self._binding[0] = value

    def __init__(self, value: _Value, meta: torch.Tensor, requires_grad: bool = False) -> None:
        super().__init__()

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return f"LazyTensor({_concrete(self)!r})"

    def cpu(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """The value as a plain CPU tensor, running the graph behind it (differentiably).
        The wrapper claims the CPU device, so PyTorch's own ``.cpu()`` would return it."""
        return _ToCPU.apply(self)

    def numpy(self, *args: Any, **kwargs: Any) -> Any:
        return self.detach().cpu().numpy()

    def tolist(self) -> Any:
        return self.detach().cpu().tolist()

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        if func in _RNNS:  # (see ember.torch.onednn)
            with onednn_off():
                return super().__torch_function__(func, types, args, kwargs)
        return super().__torch_function__(func, types, args, kwargs)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        _map(_refresh, (args, kwargs))
        if func in _ALIASES:
            (source,) = args  # (an alias shares its source's value, updates included)
            alias = LazyTensor(source._value, _meta(source))
            alias._binding, alias._view = source._binding, source._view
            return alias
        if func in _MATERIALIZING:
            return _run_eagerly(func, args, kwargs)
        if func in _METADATA_ONLY:
            return _lazy_outputs(func(*_map(_placeholder, args), **kwargs))
        if func in LOWERINGS:
            try:
                return _record(func, args, kwargs)
            except _ValueDependentShape as reason:
                return _run_by_lowering(func, args, kwargs, str(reason))
        decomposition = core_aten_table().get(func)
        if decomposition is not None:
            return decomposition(*args, **kwargs)
        decomposed = func.decompose(*args, **kwargs)
        if decomposed is not NotImplemented:
            return decomposed
        if _is_inplace(func):
            return _record_inplace(func, args, kwargs)
        functional = _functional_variant(func)
        if functional in LOWERINGS:
            return _record_mutation(func, functional, args, kwargs)
        metrics().eager_fallbacks += 1
        metrics().fallback_ops.add(str(func))
        return _lazy_outputs(_run_eagerly(func, args, kwargs))


class _ToCPU(torch.autograd.Function):
    """A lazy tensor's value as a plain CPU tensor, with the gradient flowing back."""

    @staticmethod
    def forward(ctx: Any, tensor: LazyTensor) -> torch.Tensor:
        return _concrete(tensor).clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        return to_lazy(grad)


def _map(function: Callable[[Any], Any], item: Any) -> Any:
    """``tree_map`` for what ATen ops take and return (tuples, lists and dicts of
    leaves), without pytree's generality: recording a step maps the arguments of
    thousands of ops."""
    kind = type(item)
    if kind is tuple or kind is list:
        return kind(_map(function, element) for element in item)
    if kind is dict:
        return {name: _map(function, value) for name, value in item.items()}
    return function(item)


def _leaves(item: Any) -> Iterator[Any]:
    """The leaves of ``item`` in ``_map``'s order."""
    kind = type(item)
    if kind is tuple or kind is list:
        for element in item:
            yield from _leaves(element)
    elif kind is dict:
        for value in item.values():
            yield from _leaves(value)
    else:
        yield item


def _is_inplace(func: Any) -> bool:
    schema = func._schema
    return schema.name.endswith("_") and bool(schema.arguments) \
        and schema.arguments[0].alias_info is not None and schema.arguments[0].alias_info.is_write


def _meta(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="meta")


def _placeholder(value: Any) -> Any:
    """An uninitialized CPU tensor with a lazy tensor's metadata, for ops that read no more."""
    if isinstance(value, LazyTensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype)
    return value


def _as_meta(value: Any) -> Any:
    if isinstance(value, torch.device):
        return torch.device("meta")
    return _meta(value) if isinstance(value, torch.Tensor) else value


def _as_value(value: Any) -> Any:
    if isinstance(value, LazyTensor):
        return value._value
    if isinstance(value, torch.Tensor):  # a plain tensor: an input of the graph
        return _Value(data=value.detach())
    return value


class _ValueDependentShape(Exception):
    """The op's output shape depends on its input's values: it cannot be recorded."""


def _is_value_dependent(func: Any, error: Exception) -> bool:
    return isinstance(error, _DATA_DEPENDENT_ERRORS) or (
        isinstance(error, NotImplementedError) and torch.Tag.dynamic_output_shape in func.tags)


def _meta_outputs(func: Any, args: tuple, kwargs: dict) -> Any:
    """The outputs' metadata, from the meta kernel (which fails where they depend on
    values: ``nonzero``'s, and ``index``'s by a boolean mask, which calls it), run once
    per distinct call (a scaling float's value decides no metadata)."""
    return memo("meta outputs", func, args, kwargs,
                lambda: _run_meta_kernel(func, args, kwargs),
                floats_by_type=func in _LIFTS_SCALARS)


def _run_meta_kernel(func: Any, args: tuple, kwargs: dict) -> Any:
    try:
        return func(*_map(_as_meta, args), **_map(_as_meta, kwargs))
    except Exception as error:
        if _is_value_dependent(func, error):
            raise _ValueDependentShape(
                f"{func.overloadpacket}: output shape depends on values") from error
        raise


def _record(func: Any, args: tuple, kwargs: dict) -> Any:
    """Record ``func`` as a node; its outputs' metadata comes from the meta kernel."""
    meta_out = _meta_outputs(func, args, kwargs)
    if func in _LIFTS_SCALARS:
        args = _lift_scalars(args, _LIFTS_SCALARS[func])
    node = _Node(func, _map(_as_value, args), _map(_as_value, kwargs))
    if isinstance(meta_out, torch.Tensor):
        return _output(_Value(node=node), meta_out, func, args, kwargs, 0)
    if isinstance(meta_out, (tuple, list)):
        return type(meta_out)(  # (None: an output not asked for)
            None if m is None else _output(_Value(node=node, index=i), m, func, args, kwargs, i)
            for i, m in enumerate(meta_out))
    raise NotImplementedError(f"the lazy device cannot record {func}: it returns "
                              f"{type(meta_out).__name__}")


def _lift_scalars(args: tuple, kind: ELEMENTWISE_TYPE_PROMOTION_KIND) -> tuple:
    """``args`` with each Python float as a 0-d tensor of the computation dtype (the value
    ATen computes with), when a dimensioned tensor operand decides the result dtype."""
    if not any(isinstance(a, torch.Tensor) and a.ndim > 0 for a in args):
        return args
    compute = memo("computation dtype", kind, args, {}, lambda: elementwise_dtypes(
        *_map(_as_meta, args), type_promotion_kind=kind)[0], floats_by_type=True)
    return tuple(torch.tensor(a, dtype=compute) if type(a) is float else a for a in args)


def _output(value: _Value, meta: torch.Tensor, func: Any, args: tuple, kwargs: dict,
            index: int) -> LazyTensor:
    tensor = LazyTensor(value, meta)
    if func.is_view and isinstance(args[0], LazyTensor):
        tensor._view = _View(args[0], func, args[1:], kwargs, index, args[0]._value)
    return tensor


@dataclass(eq=False)
class _View:
    """How a view was made from its base (output ``index`` of ``func`` on ``base``), and
    the base's value it was made from: values are recorded functionally, so a view is made
    again when its base changes, and an update of the view is written into its base."""
    base: LazyTensor
    func: Any
    args: tuple
    kwargs: dict
    index: int
    made_from: _Value


def _refresh(tensor: Any) -> None:
    """Make a view again from its base if the base was updated since (in place, or
    through another view of it), as PyTorch's views see their base's updates."""
    view = tensor._view if isinstance(tensor, LazyTensor) else None
    if view is None:
        return
    _refresh(view.base)
    if view.base._value is not view.made_from:
        remade = _record(view.func, (view.base, *view.args), view.kwargs)
        tensor._value = (remade if isinstance(remade, torch.Tensor) else remade[view.index])._value
        view.made_from = view.base._value


def _assign(target: LazyTensor, result: LazyTensor, func: Any) -> None:
    """Rebind ``target`` to ``result``'s value; a view writes it into its base too."""
    view = target._view
    if view is not None:
        _assign(view.base, _scatter(view, result, func), func)
        view.made_from = view.base._value
    target._value = result._value
    _live[id(target)] = target


def _scatter(view: _View, source: LazyTensor, func: Any) -> LazyTensor:
    """The view's base with ``source`` written where the view shows it."""
    base, args = view.base, view.args
    name = view.func.overloadpacket
    if name in (aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze):
        return _record(aten.view.default, (source, list(base.shape)), {})
    if name in (aten.t, aten.transpose):
        return _record(view.func, (source, *args), view.kwargs)  # (its own inverse)
    if name is aten.permute:
        return _record(aten.permute.default, (source, [list(args[0]).index(d) % base.ndim
                                                       for d in range(base.ndim)]), {})
    if name is aten.slice:
        return _record(aten.slice_scatter.default, (base, source, *args), view.kwargs)
    if name is aten.select:
        dim, index = args[0] % base.ndim, args[1] % base.shape[args[0]]
        return _record(aten.slice_scatter.default,
                       (base, _record(aten.unsqueeze.default, (source, dim), {}), dim, index,
                        index + 1), {})
    if name in (aten.split, aten.split_with_sizes):
        dim = (args[1] if len(args) > 1 else 0) % base.ndim
        sizes = args[0] if isinstance(args[0], (list, tuple)) else \
            [args[0]] * -(-base.shape[dim] // args[0])
        start = sum(sizes[:view.index])
        return _record(aten.slice_scatter.default,
                       (base, source, dim, start, start + source.shape[dim]), {})
    raise EmberTypeError(
        f"{func} updates a view ({view.func}) in place; the lazy device writes through "
        "views made by view, reshape, transpose, permute, slice, select and split, not this "
        "one yet. Write it out of place (torch.where, Tensor.index_put, torch.cat) and "
        "assign the result.")


def _record_inplace(func: Any, args: tuple, kwargs: dict) -> Any:
    """An in-place op as its out-of-place twin, with the result rebound to the target."""
    name = func._schema.name.split("::")[-1][:-1]
    functional = getattr(getattr(aten, name), func._overloadname)
    target = args[0]
    result = _record(functional, args, kwargs)
    if result.dtype != target.dtype or result.shape != target.shape:
        result = _record(aten.copy.default, (target, result), {})
    _assign(target, result, func)
    return target


def _mutated_arguments(func: Any) -> list[int]:
    return [i for i, argument in enumerate(func._schema.arguments)
            if argument.alias_info is not None and argument.alias_info.is_write]


def _functional_variant(func: Any) -> Any:
    """``op_functional``, the twin of an op that mutates some of its arguments (batch norm
    its running statistics): it returns their new values after its own outputs."""
    if not _mutated_arguments(func):
        return None
    packet = getattr(aten, func._schema.name.split("::")[-1] + "_functional", None)
    return getattr(packet, func._overloadname, None) if packet is not None else None


def _record_mutation(func: Any, functional: Any, args: tuple, kwargs: dict) -> Any:
    """A mutating op as its functional twin, with each mutated argument rebound."""
    mutated = _mutated_arguments(func)
    if any(i >= len(args) or not isinstance(args[i], LazyTensor) for i in mutated):
        raise EmberTypeError(f"{func} updates a tensor in place that is not on the lazy "
                             "device (or is passed by keyword): move it (or its module) with "
                             "ember.torch.to_lazy first")
    outputs = _record(functional, args, kwargs)
    results = len(outputs) - len(mutated)
    for i, new_value in zip(mutated, outputs[results:]):
        _assign(args[i], new_value, func)
    return tuple(outputs[:results])


def _lazy_outputs(outputs: Any) -> Any:
    """Eager results back on the lazy device (as concrete inputs of later graphs)."""
    return _map(lambda t: LazyTensor(_Value(data=t), t)
                if isinstance(t, torch.Tensor) else t, outputs)


def _run_eagerly(func: Any, args: tuple, kwargs: dict) -> Any:
    args, kwargs = _concrete_values((args, kwargs))
    return func(*args, **kwargs)


def _run_by_lowering(func: Any, args: tuple, kwargs: dict, reason: str) -> Any:
    """``func`` computed by Ember's lowering of it on its inputs' concrete values (the
    graph behind them runs first, as one graph), as a concrete tensor on the device."""
    args, kwargs = _concrete_values((args, kwargs), reason)
    try:
        return _lazy_outputs(run_lowering(func, args, kwargs))
    except EmberTypeError:
        raise
    except Exception as error:  # (name the op and the user's line, not Ember's internals)
        raise EmberTypeError(f"Ember could not compute {func} at {_user_line()}: "
                             f"{type(error).__name__}: {error}") from error


def _materialize_inputs(tree: Any, reason: str | None = None) -> None:
    """Run the graph behind the pending lazy tensors in ``tree`` (views made again from
    their updated bases first), recording the user's line (and ``reason``) as what forced
    it. Every other live pending tensor runs in the same graph, as at ``mark_step()``: the
    values read next (a model's gradients, one by one) are then concrete, where running
    each one's graph alone would compile and run the shared part once per read."""
    lazy = [t for t in _leaves(tree) if isinstance(t, LazyTensor)]
    for tensor in lazy:
        _refresh(tensor)
    if any(t._value.data is None for t in lazy):
        metrics().forced_by.append(_user_line() if reason is None
                                   else f"{_user_line()}: {reason}")
        _run_pending(lazy)


def _concrete(tensor: LazyTensor) -> torch.Tensor:
    """The tensor's value, running the graph behind it if it is pending."""
    return _concrete_values(tensor)


def _concrete_values(tree: Any, reason: str | None = None) -> Any:
    """``tree`` with each lazy tensor replaced by its value: the graph behind the pending
    ones runs first, as one graph."""
    _materialize_inputs(tree, reason)
    return _map(lambda v: v._value.data if isinstance(v, LazyTensor) else v, tree)


_LIBRARIES = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))


def _user_line() -> str:
    """``file:line`` of the innermost frame outside PyTorch and Ember."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_LIBRARIES):
            return f"{frame.filename}:{frame.lineno}"
    return "<unknown>"


def to_lazy(value: Any, device: LazyDevice | None = None) -> Any:
    """``value`` on the lazy device: a tensor as a lazy tensor (keeping ``requires_grad``),
    a module with its parameters and buffers moved in place (returned, as ``.to`` does)."""
    if device is not None and device is not _DEVICE:
        raise TypeError(f"to_lazy moves values onto ember.torch.lazy.device(); got {device!r}")
    if isinstance(value, torch.nn.Module):
        _module_to_lazy(value)
        return value
    if isinstance(value, LazyTensor):
        return value
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"to_lazy moves tensors and modules; got {type(value).__name__}")
    data = value.detach().cpu()
    return LazyTensor(_Value(data=data), data, requires_grad=value.requires_grad)


def _module_to_lazy(model: torch.nn.Module) -> None:
    # (not Module._apply: a storage-less wrapper claiming the CPU passes its "compatible
    # type" test, and it would swap the wrapper in as a plain parameter's .data)
    # (original, its twin) by the original's id, so that a tied weight stays one; the
    # original is kept, so that its id names no other tensor meanwhile
    moved: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def lazy_twin(tensor: torch.Tensor,
                  make: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if id(tensor) not in moved:
            moved[id(tensor)] = (tensor, make(tensor))
        return moved[id(tensor)][1]

    for module in model.modules():
        for name, param in module._parameters.items():
            if param is not None and not isinstance(param, LazyTensor):
                module._parameters[name] = lazy_twin(param, lambda p: torch.nn.Parameter(
                    to_lazy(p), requires_grad=p.requires_grad))
        for name, buffer in module._buffers.items():
            if buffer is not None and not isinstance(buffer, LazyTensor):
                module._buffers[name] = lazy_twin(buffer, to_lazy)


def mark_step() -> None:
    """Run every pending value of the live lazy tensors as one graph (end of a training
    step, as ``xm.mark_step()``), so the next step starts from concrete values."""
    _run_pending([])


def _run_pending(also: list[LazyTensor]) -> None:
    """Run the pending values of every live lazy tensor, and of ``also``, as one graph."""
    tensors = [*_live.values(), *also]
    pending = {id(t._value): t._value for t in tensors if t._value.data is None}
    _live.clear()  # (all concrete now; an in-place op or a new tensor enters it again)
    if pending:
        _materialize(sorted(pending.values(), key=lambda v: v.serial))


# --- compilation ----------------------------------------------------------------------

def _materialize(outputs: list[_Value]) -> None:
    """Compile (or find in the cache) the graph computing ``outputs``, and run it."""
    inputs, nodes = _collect(outputs)
    key = _structure(outputs, inputs, nodes)
    compiled = _cache.get(key)
    if compiled is None:
        compiled = EmberGraphModule(_fx_graph(outputs, inputs, nodes))
        _cache[key] = compiled
        metrics().compiles += 1
    else:
        metrics().cache_hits += 1
    start = time.perf_counter()
    results = compiled(*[v.data for v in inputs])
    metrics().execute_seconds += time.perf_counter() - start
    metrics().executions += 1
    for value, result in zip(outputs, results):
        value.data, value.node, value.index = result, None, None


def _values_in(node: _Node) -> list[_Value]:
    return [leaf for leaf in _leaves((node.args, node.kwargs)) if isinstance(leaf, _Value)]


def _collect(outputs: list[_Value]) -> tuple[list[_Value], list[_Node]]:
    """The graph's concrete inputs and its pending nodes in dependency order (both in a
    deterministic order, so that the same program gets the same structure)."""
    inputs: dict[int, _Value] = {}
    nodes: dict[int, _Node] = {}

    def visit(root: _Node) -> None:  # depth first, operands before the node
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in nodes:
                continue
            if expanded:
                nodes[id(node)] = node
                continue
            stack.append((node, True))
            stack.extend((operand.node, False) for operand in reversed(_values_in(node))
                         if operand.data is None and id(operand.node) not in nodes)

    for value in outputs:
        visit(value.node)
    for node in nodes.values():
        for operand in _values_in(node):
            if operand.data is not None:
                inputs.setdefault(id(operand), operand)
    return list(inputs.values()), list(nodes.values())


def _structure(outputs: list[_Value], inputs: list[_Value], nodes: list[_Node]) -> tuple:
    """The graph's structural hash key: ops, constants, input shapes and dtypes."""
    input_index = {id(v): i for i, v in enumerate(inputs)}
    node_index = {id(n): i for i, n in enumerate(nodes)}

    def ref(value: _Value) -> tuple:
        if value.data is not None:
            return ("input", input_index[id(value)])
        return ("node", node_index[id(value.node)], value.index)

    def freeze(item: Any) -> Any:
        if isinstance(item, _Value):
            return ref(item)
        if isinstance(item, (list, tuple)):
            return (type(item).__name__, *map(freeze, item))
        if isinstance(item, dict):
            return tuple(sorted((k, freeze(v)) for k, v in item.items()))
        return (type(item).__name__, item)

    return (tuple((str(v.data.dtype), tuple(v.data.shape)) for v in inputs),
            tuple((n.op, freeze(n.args), freeze(n.kwargs)) for n in nodes),
            tuple(ref(v) for v in outputs))


def _fx_graph(outputs: list[_Value], inputs: list[_Value],
              nodes: list[_Node]) -> torch.fx.GraphModule:
    """The recorded program as an ATen FX graph, the form the compiler takes."""
    graph = torch.fx.Graph()
    placeholders = {id(v): graph.placeholder(f"input_{i}") for i, v in enumerate(inputs)}
    produced: dict[int, torch.fx.Node] = {}

    def fx_value(value: _Value) -> torch.fx.Node:
        if value.data is not None:
            return placeholders[id(value)]
        node = produced[id(value.node)]
        if value.index is None:
            return node
        return graph.call_function(operator.getitem, (node, value.index))

    def fx_args(item: Any) -> Any:
        return _map(lambda leaf: fx_value(leaf) if isinstance(leaf, _Value) else leaf, item)

    for node in nodes:
        produced[id(node)] = graph.call_function(node.op, fx_args(node.args),
                                                 fx_args(node.kwargs))
    graph.output(tuple(fx_value(v) for v in outputs))
    return torch.fx.GraphModule(torch.nn.Module(), graph)

