"""An ATen FX graph as an Ember program: the graph is interpreted over Ember tracers, so
``ember.jit`` captures it as Ember's Graph and runs the whole pipeline on it."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

import ember
from ember.config import config
from ember.errors import EmberTypeError
from ember.torch.exchange import to_ember, to_torch
from ember.torch.lowerings import LOWERINGS


def node_source(node: torch.fx.Node) -> str:
    """The user's line that made ``node`` (the last frame of its stack trace), if known."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines()]
    frames = [line for line in lines if line.startswith("File")]
    return frames[-1] if frames else ""


class _EmberInterpreter(torch.fx.Interpreter):
    """Runs an ATen graph with each op's Ember lowering in place of the op."""

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        lowering = LOWERINGS.get(target)
        if lowering is None:
            raise EmberTypeError(f"no Ember lowering for {target}; the partitioner should "
                                 "have left this op to PyTorch")
        return lowering(*args, **kwargs)

    def run_node(self, node: torch.fx.Node) -> Any:
        try:
            return super().run_node(node)
        except EmberTypeError:
            raise
        except Exception as error:  # name the op and the user's line, not torch internals
            where = node_source(node)
            raise EmberTypeError(
                f"Ember could not lower {node.target} ({node.format_node()})"
                f"{' from ' + where if where else ''}: {type(error).__name__}: {error}. "
                "Report it, or run that op in PyTorch (it falls back when it has no "
                "entry in ember.torch.lowerings).") from error


class EmberGraphModule:
    """Calls an ATen graph module compiled by Ember, taking and returning tensors."""

    def __init__(self, graph_module: torch.fx.GraphModule) -> None:
        self.graph_module = graph_module
        interpreter = _EmberInterpreter(graph_module)

        def program(*arrays: Any) -> Any:
            return interpreter.run(*arrays, enable_io_processing=False)

        program.__name__ = "torch_graph"
        self.jitted = ember.jit(program)

    def __call__(self, *tensors: Any) -> Any:
        with config.override(enable_x64=True):  # ATen indices are int64
            outputs = self.jitted(*[_argument(t) for t in tensors])
        return _results(outputs)


def _argument(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return to_ember(value)
    raise EmberTypeError(f"Ember's PyTorch bridge compiles graphs over tensors with static "
                         f"shapes; got an input of type {type(value).__name__}. Compile with "
                         "torch.compile(..., dynamic=False).")


def _results(outputs: Any) -> Any:
    if isinstance(outputs, (list, tuple)):
        return type(outputs)(_results(o) for o in outputs)
    if outputs is None:
        return None
    return to_torch(outputs)


def compile_graph(graph_module: torch.fx.GraphModule) -> Callable[..., Any]:
    """The unboxed callable of a graph whose every op has a lowering (traced and compiled
    on its first call, by ``ember.jit``, for the shapes it is called with)."""
    return EmberGraphModule(graph_module)
