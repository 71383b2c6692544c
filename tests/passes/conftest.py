"""Golden IR tests for graph passes: IR text in, IR text out, same values."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from ember.core import dtypes
from ember.ir.graph import Graph
from ember.ir.interpreter import eval_graph
from ember.ir.parser import parse_graph
from ember.ir.printer import print_graph
from ember.ir.verifier import verify


def random_args(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for aval in graph.in_avals:
        if dtypes.is_bool(aval.dtype):
            args.append(rng.random(aval.shape) < 0.5)
        elif dtypes.is_integer(aval.dtype):
            args.append(rng.integers(-5, 6, aval.shape).astype(aval.dtype))
        else:
            args.append(rng.uniform(-2, 2, aval.shape).astype(aval.dtype))
    return args


def assert_same_values(before: Graph, after: Graph, exact: bool = True) -> None:
    """Both graphs give the same results on random inputs (bit for bit when ``exact``)."""
    args = random_args(before)
    for want, got in zip(eval_graph(before, args), eval_graph(after, args)):
        want, got = np.asarray(want), np.asarray(got)
        assert want.dtype == got.dtype and want.shape == got.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        else:  # (sums reordered round apart: within a share of the values' scale)
            finite = np.abs(want[np.isfinite(want)])
            scale = max(1.0, float(finite.max())) if finite.size else 1.0
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


def _apply(graph_pass, before: str, after: str, consts=None, exact: bool = True) -> Graph:
    graph = parse_graph(textwrap.dedent(before), consts)
    verify(graph)
    result = graph_pass(graph)
    verify(result)
    assert print_graph(result) == textwrap.dedent(after).strip()
    assert_same_values(graph, result, exact)
    return result


@pytest.fixture
def rewrites():
    """``rewrites(pass, before_ir, after_ir)``: the pass turns one text into the other,
    keeps the graph valid and its values the same."""
    return _apply


@pytest.fixture
def same_values():
    """``same_values(before, after, exact=True)``: both graphs compute the same."""
    return assert_same_values
