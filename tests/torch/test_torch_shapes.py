"""Shapes through torch.compile(backend="ember") against PyTorch eager: static by default,
a new shape recompiles and the log says why; dynamic=True / mark_dynamic trace once, and
Ember compiles the graph once per power-of-two bucket of a size where padding keeps the
results, else once per size, with the op that refused the bucket in the log."""
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


@pytest.fixture(autouse=True)
def _fresh_metrics():
    ember.torch.reset_metrics()


def _compiles(caplog) -> list[str]:
    """The log's line for each graph Ember compiled (as many as the metrics count)."""
    lines = [r.getMessage() for r in caplog.records if "Ember compiles a graph" in r.getMessage()
             and "once per size" not in r.getMessage()]
    assert len(lines) == ember.torch.metrics().graph_compiles
    return lines


@pytest.mark.parametrize("mode", ["dynamic=True", "mark_dynamic"])
def test_a_growing_batch_compiles_once_per_power_of_two_bucket(mode, caplog):
    # (the backward sums over the batch for the weights' gradients: the padded rows are
    # zeroed first, so the batch size still buckets)
    model, backend = _mlp(), _Counting()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=backend, dynamic=True if mode == "dynamic=True"
                             else None)
    sizes = range(3, 18)
    batches = [(torch.randn(n, 12), torch.randint(0, 5, (n,))) for n in sizes]
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
    compiles = _compiles(caplog)
    # the forward and the backward graph each compile for the buckets 4, 8, 16 and 32 of
    # the 15 sizes 3..17, and the log says which size needed a new one
    assert len(compiles) == 2 * 4, compiles
    assert sum("=17 in bucket 32" in m and "16 -> 32" in m for m in compiles) == 2, compiles


class _TokenMLP(nn.Module):
    """A per-token model over a sequence-first batch (length, batch, width), as nn.LSTM
    and nn.Transformer take it by default."""

    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 3)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.down(self.norm(F.gelu(self.up(x))))


def test_a_growing_sequence_compiles_once_per_bucket_and_its_gradients_match(caplog):
    model = _TokenMLP()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="ember")
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for length in range(3, 11):
            x = torch.randn(length, 2, 8, requires_grad=True)
            x_eager = x.detach().clone().requires_grad_()
            torch._dynamo.mark_dynamic(x, 0)
            out, expected = compiled(x), eager(x_eager)
            torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
            (out * torch.arange(3.0)).sum().backward()
            (expected * torch.arange(3.0)).sum().backward()
            torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-5, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert len(_compiles(caplog)) == 2 * 3  # buckets 4, 8 and 16 of the lengths 3..10


@pytest.mark.parametrize("fn, refused", [
    (lambda x: torch.exp(x).sum(0), None),  # (exp of a padded 0 is 1: zeroed before the sum)
    (lambda x: torch.log(x).sum(0), None),  # (-inf at the padding: a select, not a product)
    (lambda x: x.t() @ torch.exp(x), None),  # (a matmul contracting the padded dim)
    (lambda x: torch.cumsum(x, 0) * 2, None),  # (a prefix: the padding comes after)
    (lambda x: torch.softmax(x, 0), None),  # (the padding at -inf weighs nothing)
    (lambda x: x.amax(0), None),  # (-inf at the padding)
    (lambda x: torch.var(x, 0), "aten.var.correction"),
    (lambda x: x[-1] * 2, "aten.select.int"),
    (lambda x: torch.cat([x, x]) + 1, "aten.cat.default"),
    (lambda x: x.flip(0) + 1, "aten.flip.default"),
], ids=["sum", "sum-of-log", "matmul", "cumsum", "softmax", "amax", "var", "last", "cat",
        "flip"])
def test_each_op_buckets_the_dim_or_says_why_not(fn, refused, caplog):
    compiled = torch.compile(fn, backend="ember", dynamic=True)
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for length in (3, 5, 6):
            x = torch.rand(length, 4) + 0.5
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)
    refusals = [r.getMessage() for r in caplog.records if "once per size" in r.getMessage()]
    if refused is None:
        assert refusals == [] and len(_compiles(caplog)) == 2  # (buckets 4 and 8)
    else:
        assert len(refusals) == 1 and refused in refusals[0], refusals
        assert len(_compiles(caplog)) == 3


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return self.head(F.max_pool2d(F.relu(self.bn(self.conv(x))), 2).flatten(1))


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_a_conv_net_buckets_its_batch_unless_batch_norm_trains(training, caplog):
    # (in training, batch norm's statistics mix the batch, and its graph compiles per
    # size; in eval mode the whole net, forward and backward, buckets the batch)
    model = _ConvNet().train(training)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="ember")
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for batch in (3, 5, 6):
            x = torch.randn(batch, 3, 8, 8)
            torch._dynamo.mark_dynamic(x, 0)
            out, expected = compiled(x), eager(x)
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
            out.sum().backward()
            expected.sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)
    torch.testing.assert_close(model.bn.running_mean, eager.bn.running_mean)
    refusals = [r.getMessage() for r in caplog.records if "once per size" in r.getMessage()]
    if training:
        # (with a symbolic batch, the variance's n / (n - 1) is left to PyTorch: the forward
        # is two graphs around it, and the one with batch norm compiles per size)
        assert len(refusals) == 1 and "batch statistics" in refusals[0], refusals
    else:
        assert refusals == [] and len(_compiles(caplog)) == 2 + 2
