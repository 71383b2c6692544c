"""A graph with ops whose results' shapes depend on values (``nonzero``, ``unique``,
``Tensor.item``: Dynamo gives them unbacked symbolic sizes) runs in stages: Ember
compiles the ops between two such ops as one program, for the shapes it is called
with, and runs each such op between the programs on concrete arrays, with Ember's eager
ops. The sizes and tests on them that PyTorch's graph computes (and its assertions) run
in Python between the programs, so each program sees them as constants. Inductor keeps
such sizes symbolic in one kernel graph; Ember's programs have static shapes, and its
compile cache makes a shape it has seen free."""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx
from torch.utils._pytree import tree_map

import ember.numpy as jnp
from ember.config import config
from ember.runtime.array import Array
from ember.torch.exchange import to_ember, to_torch
from ember.torch.graph_compiler import EmberGraphModule, lowering
from ember.torch.lowerings import LOWERINGS

Env = dict[torch.fx.Node, Any]


def is_data_dependent(node: torch.fx.Node) -> bool:
    """An op that binds a new unbacked size: its result's shape (or value, for ``item``)
    depends on the values of its inputs."""
    return node.op == "call_function" and bool(node.meta.get("unbacked_bindings"))


def compile_graph(graph_module: torch.fx.GraphModule) -> Callable[..., Any]:
    """The unboxed callable of a graph whose every op has a lowering (traced and compiled
    on its first call, by ``ember.jit``, for the shapes it is called with): one program,
    or programs between the ops whose shapes depend on values."""
    if any(is_data_dependent(node) for node in graph_module.graph.nodes):
        return StagedGraph(graph_module)
    return EmberGraphModule(graph_module)


_NUMBERS = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)


def _is_scalar(node: torch.fx.Node) -> bool:
    """A node whose value is a Python number (a size, a test on sizes), or an assertion."""
    return node.op == "call_function" and (isinstance(node.meta.get("val"), _NUMBERS)
                                           or node.target is torch.ops.aten._assert_scalar.default)


@dataclass
class _Program:
    """Ops compiled together: they read ``inputs`` and define ``outputs`` for later steps."""

    nodes: list[torch.fx.Node] = field(default_factory=list)
    inputs: list[torch.fx.Node] = field(default_factory=list)
    outputs: list[torch.fx.Node] = field(default_factory=list)
    run: Callable[..., Any] | None = None

    def __call__(self, env: Env) -> None:
        results = self.run(*(env[node] for node in self.inputs))
        env.update(zip(self.outputs, results))


@dataclass
class _Eager:
    """One op on concrete values: a data-dependent op (arrays in and out through Ember's
    eager ops), or a Python number computed from sizes."""

    node: torch.fx.Node
    in_python: bool = field(init=False)  # (a getitem or a number: no arrays to exchange)

    def __post_init__(self) -> None:
        self.in_python = self.node.target is operator.getitem or (
            _is_scalar(self.node) and not is_data_dependent(self.node))

    def __call__(self, env: Env) -> None:
        node = self.node
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), env.__getitem__)
        if self.in_python:
            env[node] = LOWERINGS[node.target](*args, **kwargs)
            return
        if getattr(node.target, "is_view", False):
            # (a view by a tensor's value, e.g. ``narrow``, computes nothing: it is a new
            # layout of its input's memory, which must be PyTorch's own view of it, as
            # inductor's is; AOTAutograd takes an output that aliases an input as
            # ``input.as_strided`` with the output's strides and offset)
            env[node] = node.target(*args, **kwargs)
            return
        with lowering(node):
            env[node] = run_lowering(node.target, args, kwargs)


def run_lowering(target: Any, args: tuple, kwargs: dict) -> Any:
    """The results of ``target``'s lowering run by Ember's eager ops on concrete tensors
    (as Ember arrays over their memory), as tensors."""
    args, kwargs = tree_map(
        lambda v: jnp.asarray(to_ember(v)) if isinstance(v, torch.Tensor) else v, (args, kwargs))
    with config.override(enable_x64=True):  # (ATen's int64 indices)
        result = LOWERINGS[target](*args, **kwargs)
    return tree_map(lambda v: to_torch(v) if isinstance(v, (Array, np.ndarray)) else v, result)


class StagedGraph:
    """Calls a graph with data-dependent ops as programs and eager steps (see the module's
    docstring), taking and returning tensors as ``EmberGraphModule`` does."""

    def __init__(self, graph_module: torch.fx.GraphModule) -> None:
        graph = graph_module.graph
        self._placeholders = list(graph.find_nodes(op="placeholder"))
        (self._returned,) = graph.find_nodes(op="output")[0].args
        self._steps = _plan(graph)
        for step in self._steps:
            if isinstance(step, _Program):
                # (each program for the exact shapes and sizes it gets: the sizes of
                # data-dependent results are not the graph's inputs to bucket)
                step.run = EmberGraphModule(_program_graph(graph_module, step), bucketed=False)
        self._freed = _freed_after(self._steps, self._returned)

    def __call__(self, *inputs: Any) -> Any:
        env: Env = dict(zip(self._placeholders, inputs))
        for step, freed in zip(self._steps, self._freed):
            step(env)
            for node in freed:  # (an intermediate tensor lives only while it is needed)
                del env[node]
        return torch.fx.node.map_arg(self._returned, env.__getitem__)


def _freed_after(steps: Sequence[_Program | _Eager], returned: Any) -> list[list[torch.fx.Node]]:
    """For each step, the values that no later step and not the graph's result reads."""
    kept: set[torch.fx.Node] = set()
    torch.fx.node.map_arg(returned, kept.add)
    last_read: dict[torch.fx.Node, int] = {}
    for index, step in enumerate(steps):
        reads = step.inputs if isinstance(step, _Program) else step.node.all_input_nodes
        last_read.update((node, index) for node in reads)
    freed: list[list[torch.fx.Node]] = [[] for _ in steps]
    for node, index in last_read.items():
        if node not in kept:
            freed[index].append(node)
    return freed


def _plan(graph: torch.fx.Graph) -> list[_Program | _Eager]:
    """The steps of ``graph`` in an order that respects its edges: programs of the ops
    between data-dependent ones, eager steps for those ops (and the ``getitem``s taking
    their tuples apart) and for Python numbers that need nothing of the open program."""
    steps: list[_Program | _Eager] = []
    pending: list[_Eager] = []  # (Python numbers that run before the open program)
    program = _Program()
    in_program: set[torch.fx.Node] = set()  # (the open program's nodes)

    def close_program() -> None:
        nonlocal program
        steps.extend(pending)
        pending.clear()
        if program.nodes:
            steps.append(program)
        program = _Program()
        in_program.clear()

    eager: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if is_data_dependent(node):
            close_program()
            steps.append(_Eager(node))
            eager.add(node)
        elif node.target is operator.getitem and node.args[0] in eager:
            steps.append(_Eager(node))  # (before the open program: it needs only its op)
            eager.add(node)
        elif _is_scalar(node) and not any(arg in in_program for arg in node.all_input_nodes):
            pending.append(_Eager(node))
        else:
            program.nodes.append(node)
            in_program.add(node)
    close_program()
    _wire(steps, graph)
    return steps


def _wire(steps: Sequence[_Program | _Eager], graph: torch.fx.Graph) -> None:
    """Each program's inputs (values it reads from outside it) and outputs (values that
    later steps or the graph's result read)."""
    for step in steps:
        if not isinstance(step, _Program):
            continue
        members = set(step.nodes)
        for node in step.nodes:
            for arg in node.all_input_nodes:
                if arg not in members and arg not in step.inputs:
                    step.inputs.append(arg)
        step.outputs = [node for node in step.nodes
                        if any(user not in members for user in node.users)]


def _program_graph(root: torch.fx.GraphModule, program: _Program) -> torch.fx.GraphModule:
    """The ops of ``program`` as a graph module of their own (constants from ``root``)."""
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in program.inputs:
        copies[node] = graph.placeholder(node.name)
        copies[node].meta = dict(node.meta)
    for node in program.nodes:
        copies[node] = graph.node_copy(node, copies.__getitem__)
    graph.output(tuple(copies[node] for node in program.outputs))
    return torch.fx.GraphModule(root, graph)
