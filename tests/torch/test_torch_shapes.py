"""Shapes through torch.compile(backend="ember") against PyTorch eager: static by default,
a new shape recompiles and the log says why; dynamic=True / mark_dynamic trace once, and
Ember compiles the graph for each concrete size it meets."""
from __future__ import annotations

import copy
import logging

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch
import torch.nn.functional as F
from torch import nn

import ember.torch


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))


class _Counting:
    """The ember backend, counting the graphs Dynamo hands it."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return ember.torch.ember_backend(graph_module, example_inputs)


def test_a_new_static_shape_recompiles_and_the_log_says_why(caplog):
    model, backend = _mlp(), _Counting()
    compiled = torch.compile(model, backend=backend, dynamic=False)
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for batch in (3, 7, 3, 7):  # (a seen shape is in Dynamo's cache: free)
            x = torch.randn(batch, 12)
            torch.testing.assert_close(compiled(x), model(x))
    assert backend.graphs == 2
    reasons = [r.getMessage() for r in caplog.records if "recompiles" in r.getMessage()]
    assert len(reasons) == 1
    assert "size mismatch at index 0. expected 3, actual 7" in reasons[0]


def _train(model, batches) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("mode", ["dynamic=True", "mark_dynamic"])
def test_dynamic_shapes_trace_once_and_train_like_eager(mode, caplog):
    model, backend = _mlp(), _Counting()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=backend, dynamic=True if mode == "dynamic=True"
                             else None)
    batches = [(torch.randn(n, 12), torch.randint(0, 5, (n,))) for n in (4, 6, 9, 6, 4)]
    if mode == "mark_dynamic":
        for x, y in batches:
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(y, 0)
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        losses = _train(compiled, batches)
    torch.testing.assert_close(losses, _train(eager, batches), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4, msg=name)
    assert backend.graphs == 1  # (one symbolic trace for every batch size)
    again = [r.getMessage() for r in caplog.records if "again" in r.getMessage()]
    # the forward and the backward graph each compile for sizes 6 and 9 after 4; the
    # sizes seen before are Ember's cache hits
    assert len(again) == 4 and all("4 -> 6" in m or "6 -> 9" in m for m in again), again
