"""An ATen FX graph as an Ember program: the graph is interpreted over Ember tracers, so
``ember.jit`` captures it as Ember's Graph and runs the whole pipeline on it."""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx

import ember
from ember.config import config
from ember.core.source_info import source_override
from ember.errors import EmberTypeError
from ember.torch.exchange import to_ember
from ember.torch.buckets import BucketPlan, plan_buckets
from ember.torch.lowerings import LOWERINGS
from ember.torch.metrics import metrics
from ember.torch.program_call import ProgramCall
from ember.torch.source import node_location, node_source

log = logging.getLogger("ember.torch")


class _EmberInterpreter(torch.fx.Interpreter):
    """Runs an ATen graph with each op's Ember lowering in place of the op."""

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        lowering = LOWERINGS.get(target)
        if lowering is None:
            raise EmberTypeError(f"no Ember lowering for {target}; the partitioner should "
                                 "have left this op to PyTorch")
        return lowering(*args, **kwargs)

    def get_attr(self, target: Any, args: tuple, kwargs: dict) -> Any:
        value = super().get_attr(target, args, kwargs)  # (a tensor constant of the graph)
        return to_ember(value) if isinstance(value, torch.Tensor) else value

    def run_node(self, node: torch.fx.Node) -> Any:
        with lowering(node):
            return super().run_node(node)


@contextlib.contextmanager
def lowering(node: torch.fx.Node) -> Iterator[None]:
    """Where ``node`` is lowered: Ember's ops it calls carry the user's line, and a
    failure names the op and that line, not torch internals."""
    try:
        with source_override(node_location(node)):
            yield
    except EmberTypeError:
        raise
    except Exception as error:
        where = node_source(node)
        raise EmberTypeError(
            f"Ember could not lower {node.target} ({node.format_node()})"
            f"{' from ' + where if where else ''}: {type(error).__name__}: {error}. "
            "Report it, or run that op in PyTorch (it falls back when it has no "
            "entry in ember.torch.lowerings).") from error


class EmberGraphModule:
    """Calls an ATen graph module compiled by Ember, taking and returning tensors. A graph
    with symbolic shapes (``dynamic=True``) also takes sizes as ints: Ember compiles it for
    each power-of-two bucket of the sizes where padding keeps its results (see
    ``ember.torch.buckets``), else for each size, and logs why it compiles again
    (``bucketed=False``: for each size)."""

    def __init__(self, graph_module: torch.fx.GraphModule, bucketed: bool = True) -> None:
        self.graph_module = graph_module
        self._buckets: BucketPlan | None = plan_buckets(graph_module) if bucketed else None
        for symbol, reason in (self._buckets.refusals if self._buckets else {}).items():
            metrics().refused_buckets.append(f"{symbol}: {reason}")
            log.info("Ember compiles a graph of %d ops once per size of %s, not per "
                     "power-of-two bucket: %s", len(graph_module.graph.nodes), symbol, reason)
        self._interpreter = _EmberInterpreter(
            self._buckets.graph_module if self._buckets else graph_module)
        self._programs: dict[tuple, Callable[..., Any]] = {}  # by the sizes passed as ints
        self._calls: dict[tuple, ProgramCall] = {}  # by the inputs' shapes and sizes
        self._last_signature: tuple | None = None
        self._signatures: set[tuple] = set()
        # (the outputs that are sizes: a forward graph with symbolic shapes saves some for
        # its backward, and they return as Python ints, not tensors)
        (returned,) = graph_module.graph.find_nodes(op="output")[0].args
        returned = returned if isinstance(returned, (list, tuple)) else ()
        self._size_outputs = {i for i, node in enumerate(returned)
                              if isinstance(node, torch.fx.Node)
                              and isinstance(node.meta.get("val"), (int, torch.SymInt))}

    def _program(self, sizes: tuple[tuple[int, Any], ...]) -> Callable[..., Any]:
        program = self._programs.get(sizes)
        if program is None:
            def run(*arrays: Any) -> Any:
                args = list(arrays)
                for position, size in sizes:
                    args.insert(position, size)
                return self._interpreter.run(*args, enable_io_processing=False)

            run.__name__ = "torch_graph"
            program = self._programs[sizes] = ember.jit(run)
        return program

    def __call__(self, *inputs: Any) -> Any:
        padded, real_sizes = self._buckets.pad(inputs) if self._buckets else (inputs, [])
        key = (tuple((v.shape, v.dtype) if isinstance(v, torch.Tensor) else v for v in padded),
               config.snapshot(), torch.get_num_threads())
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = self._compile(padded, real_sizes, inputs)
        outputs = call(padded, real_sizes)
        return self._buckets.unpad(outputs, inputs) if self._buckets else outputs

    def _compile(self, padded: Sequence[Any], real_sizes: list[torch.Tensor],
                 inputs: Sequence[Any]) -> ProgramCall:
        """The program for the shapes and sizes of ``padded`` (traced and compiled by
        ``ember.jit``, through its compile cache), and how to call it."""
        sizes = tuple((i, v) for i, v in enumerate(padded) if not isinstance(v, torch.Tensor))
        arrays = [to_ember(t) for t in [*(v for v in padded if isinstance(v, torch.Tensor)),
                                         *real_sizes]]
        self._log_new_signature(sizes, arrays[:len(arrays) - len(real_sizes)], inputs)
        # (ATen indices are int64; the kernels use as many threads as PyTorch's own ops)
        with config.override(enable_x64=True, num_threads=kernel_threads()):
            compiled = self._program(sizes).lower(*arrays).compile()
        return ProgramCall(compiled, self._interpreter.module.graph, padded, self._size_outputs)

    def _log_new_signature(self, sizes: tuple, arrays: list[Any], inputs: Sequence[Any]) -> None:
        signature = (sizes, tuple((a.shape, str(a.dtype)) for a in arrays))
        if signature in self._signatures:
            return
        metrics().graph_compiles += 1
        bucketed = f" ({self._buckets.describe(inputs)})" if self._buckets and \
            self._buckets.sizes else ""
        if self._last_signature is not None:
            log.info("Ember compiles a graph of %d ops again, as its inputs changed: %s%s",
                     len(self.graph_module.graph.nodes),
                     _difference(self._last_signature, signature), bucketed)
        else:
            log.info("Ember compiles a graph of %d ops%s", len(self.graph_module.graph.nodes),
                     bucketed)
        self._signatures.add(signature)
        self._last_signature = signature


def kernel_threads() -> int:
    """The threads of the kernels Ember compiles for PyTorch: Ember's ``num_threads`` where
    it is set, else PyTorch's intra-op thread count (``torch.set_num_threads``, which
    ``OMP_NUM_THREADS`` sets too), as inductor's kernels do. Ember's own default, every
    core, makes each GEMM an OpenMP team of all cores: beside eager ops limited to one
    thread, or on a busy host, its threads wait for each other (a GPT block's train step
    took 60 ms of CPU time with two threads on a loaded two-core host, 5 ms with one)."""
    return config.num_threads or torch.get_num_threads()


def _difference(old: tuple, new: tuple) -> str:
    """What changed between two input signatures, e.g. "input 1 shape (3, 12) -> (7, 12)"."""
    changes = [f"size input {i}: {a} -> {b}" for (i, a), (_, b) in zip(old[0], new[0]) if a != b]
    changes += [f"input {i} {'shape' if a[0] != b[0] else 'dtype'} "
                f"{a[0] if a[0] != b[0] else a[1]} -> {b[0] if a[0] != b[0] else b[1]}"
                for i, (a, b) in enumerate(zip(old[1], new[1])) if a != b]
    shown = 4
    more = f"; and {len(changes) - shown} more input(s)" if len(changes) > shown else ""
    return "; ".join(changes[:shown]) + more
