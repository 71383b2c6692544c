"""Shape buckets that need a mask or a layout, through torch.compile(backend="ember") against
PyTorch eager, forward and backward: a batch-first transformer block (nn.Linear flattens
[B, L, W] to [B*L, W], which interleaves the padding of L; causal attention over a padded
sequence), a softmax and a mean over the dynamic dim, and what still refuses, with the op
and why in the log."""
from __future__ import annotations

import copy
import logging

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch
import torch.nn.functional as F
from torch import nn

import ember.torch


@pytest.fixture(autouse=True)
def _fresh_metrics():
    ember.torch.reset_metrics()


def _refusals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "once per size" in r.getMessage()]


def _compiles(caplog) -> list[str]:
    """The log's line for each graph Ember compiled (as many as the metrics count)."""
    lines = [r.getMessage() for r in caplog.records if "Ember compiles a graph" in r.getMessage()
             and "once per size" not in r.getMessage()]
    assert len(lines) == ember.torch.metrics().graph_compiles
    return lines


class _Block(nn.Module):
    """A pre-norm GPT block over batch-first [batch, length, width] inputs."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.norm2(x))


def test_a_batch_first_gpt_block_compiles_once_per_bucket_of_its_length(caplog):
    model = _Block()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="ember", dynamic=True)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager)]
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for length in range(3, 18):
            x, target = torch.randn(2, length, 16), torch.randn(2, length, 16)
            losses = [F.mse_loss(m(x), target) for m in (compiled, eager)]
            for loss in losses:
                loss.backward()
            torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-6)
            for (name, p), q in zip(model.named_parameters(), eager.parameters()):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5,
                                           msg=f"{name} at length {length}")
            for optimizer in optimizers:
                optimizer.step()
                optimizer.zero_grad()
    compiles = _compiles(caplog)
    # the forward and the backward graph each compile for the buckets 4, 8, 16 and 32 of
    # the lengths 3..17 (not 15 times each); the batch, merged with the length by the
    # linears' flatten, compiles per value (one here), and the log says so
    assert len(compiles) == 2 * 4, compiles
    assert sum("=17 in bucket 32" in m for m in compiles) == 2, compiles
    refusals = _refusals(caplog)  # (the batch's: forward and backward)
    assert len(refusals) == 2 and all("dim of size s" in r for r in refusals), refusals


@pytest.mark.parametrize("softmax", [torch.softmax, torch.log_softmax],
                         ids=["softmax", "log_softmax"])
def test_a_softmax_over_the_dynamic_dim_buckets(softmax, caplog):
    def fn(x):  # (padded keys at -inf weigh nothing)
        return softmax(x * 3, dim=-1)

    compiled = torch.compile(fn, backend="ember")
    weights = torch.randn(4, 8)
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for length in (3, 5, 6, 8):
            x = torch.randn(4, length, requires_grad=True)
            x_eager = x.detach().clone().requires_grad_()
            torch._dynamo.mark_dynamic(x, 1)
            out, expected = compiled(x), fn(x_eager)
            torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
            (out * weights[:, :length]).sum().backward()
            (expected * weights[:, :length]).sum().backward()
            torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-5, atol=1e-6)
    assert _refusals(caplog) == []
    assert len(_compiles(caplog)) == 2 * 2  # (buckets 4 and 8, forward and backward)


class _MeanPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Linear(8, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.embed(x)).mean(dim=0))  # (over the length)


def test_a_mean_over_the_dynamic_dim_divides_by_the_real_size(caplog):
    model = _MeanPool()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="ember")
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for length in (3, 4, 5, 7):
            x = torch.randn(length, 8)
            torch._dynamo.mark_dynamic(x, 0)
            out, expected = compiled(x), eager(x)
            torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
            out.sum().backward()
            expected.sum().backward()
            for (name, p), q in zip(model.named_parameters(), eager.parameters()):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert _refusals(caplog) == []
    assert len(_compiles(caplog)) == 2 * 2  # (buckets 4 and 8, forward and backward)


@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_attention_over_padded_keys_masks_them(mask, caplog):
    # (the padded keys are masked out for real queries; a padded query attends to every
    # key, so that a mask cannot leave its row empty)
    def attend(q, k, v, attn_mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)

    compiled = torch.compile(attend, backend="ember")
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for length in (3, 5, 6):
            q, k, v = (torch.randn(1, 2, length, 4, requires_grad=True) for _ in range(3))
            eager = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            keep = torch.rand(length, length) > 0.3
            keep[:, 0] = True  # (no row left empty)
            attn_mask = {None: None, "bool": keep,
                         "float": torch.where(keep, 0.0, float("-inf"))}[mask]
            for t in (q, k, v):
                torch._dynamo.mark_dynamic(t, 2)
            if attn_mask is not None:
                torch._dynamo.mark_dynamic(attn_mask, 0)
                torch._dynamo.mark_dynamic(attn_mask, 1)
            out, expected = compiled(q, k, v, attn_mask), attend(*eager, attn_mask)
            torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
            weights = torch.randn(out.shape)
            (out * weights).sum().backward()
            (expected * weights).sum().backward()
            for t, e in zip((q, k, v), eager):
                torch.testing.assert_close(t.grad, e.grad, rtol=1e-4, atol=1e-5)
    assert _refusals(caplog) == []
    assert len(_compiles(caplog)) == 2 * 2  # (buckets 4 and 8, forward and backward)


class _LastToken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Linear(8, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.embed(x))[-1])  # (the last real position)


def test_picking_the_last_position_refuses_the_bucket_and_says_why(caplog):
    # (in a bucket, the last position is padding: not exact, so it compiles per length,
    # and the log names the op, the user's line and why)
    model = _LastToken()
    compiled = torch.compile(model, backend="ember")
    with caplog.at_level(logging.INFO, logger="ember.torch"):
        for length in (3, 5, 6):
            x = torch.randn(length, 8)
            torch._dynamo.mark_dynamic(x, 0)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
    refusals = _refusals(caplog)  # (the forward's, and the backward's)
    assert len(refusals) == 2, refusals
    assert "aten.select.int" in refusals[0] and "picks one position" in refusals[0]
    assert f"{__file__}\", line " in refusals[0] and "in forward" in refusals[0]
    assert refusals[0].split(": ", 1)[1] in ember.torch.metrics().refused_buckets[0]
    assert len(_compiles(caplog)) == 3  # (once per length)
