"""Ops Ember has no lowering for stay in PyTorch (torch.fx's capability-based
partitioner); ember.torch.explain lists them with the user's line."""
from __future__ import annotations

import copy
import inspect

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch
from torch import nn

import ember.torch


@torch.library.custom_op("ember_tests::tripled", mutates_args=())
def tripled(x: torch.Tensor) -> torch.Tensor:
    """A user's own op: no lowering of Ember's can know it."""
    return x * 3


@tripled.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


tripled.register_autograd(lambda ctx, grad: grad * 3)
OWN_OP = "ember_tests.tripled.default"


class OwnOpInTheMiddle(nn.Module):
    """Linear layers around a user's own op, which Ember has no lowering for."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(6, 6)
        self.second = nn.Linear(6, 3)

    def forward(self, x):
        h = self.first(x).relu()
        h = tripled(h)  # the op that falls back
        return self.second(h * 2)


OWN_OP_LINE = next(number for number, line in enumerate(
    inspect.getsourcelines(OwnOpInTheMiddle)[0], inspect.getsourcelines(OwnOpInTheMiddle)[1])
    if "tripled(h)" in line)


def test_a_model_with_an_unsupported_op_runs_forward_and_backward():
    model = OwnOpInTheMiddle()
    eager = copy.deepcopy(model)
    x = torch.randn(4, 6)
    out = ember.torch.compile(model)(x)
    expected = eager(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    expected.square().sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)


def test_only_the_supported_parts_go_to_ember():
    from ember.torch import backend as backend_module

    compiled_parts = []
    original = backend_module.compile_graph

    def recording(graph_module):
        compiled_parts.append({str(n.target) for n in graph_module.graph.nodes
                               if n.op == "call_function"})
        return original(graph_module)

    backend_module.compile_graph = recording
    try:
        with torch.no_grad():
            ember.torch.compile(OwnOpInTheMiddle())(torch.randn(4, 6))
    finally:
        backend_module.compile_graph = original
    assert len(compiled_parts) == 2  # before and after the user's op
    assert all(OWN_OP not in ops for ops in compiled_parts)
    assert any("aten.addmm.default" in ops for ops in compiled_parts)


def test_explain_lists_the_fallback_with_the_users_line():
    report = ember.torch.explain(OwnOpInTheMiddle(), torch.randn(4, 6))
    assert [f.op for f in report.fallbacks] == [OWN_OP]
    assert f"line {OWN_OP_LINE}" in report.fallbacks[0].source
    assert __file__ in report.fallbacks[0].source
    assert OWN_OP in str(report)
    assert report.graphs == 1 and report.ops > 1


def test_explain_of_a_fully_supported_model_lists_nothing():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    assert ember.torch.explain(model, torch.randn(3, 4)).fallbacks == []


def test_without_fallback_an_unsupported_op_is_an_error_naming_it():
    with pytest.raises(Exception, match=OWN_OP) as info:
        ember.torch.compile(OwnOpInTheMiddle(), fallback=False)(torch.randn(4, 6))
    assert f"line {OWN_OP_LINE}" in str(info.value)


def test_an_unsupported_dtype_falls_back():
    def scaled(x):
        return torch.view_as_real(x * 2).sum()

    x = torch.ones(5).to(torch.complex32)  # (NumPy has no complex32)
    report = ember.torch.explain(scaled, x)
    assert {f.op for f in report.fallbacks} >= {"aten.mul.Tensor"}
    torch.testing.assert_close(ember.torch.compile(scaled)(x), scaled(x))
    # without fallback the error says it is the dtype, not the op
    with pytest.raises(Exception, match="Ember holds no torch.complex32 tensors, which aten.mul"):
        ember.torch.compile(scaled, fallback=False)(x)
