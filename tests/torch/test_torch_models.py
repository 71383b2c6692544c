"""Whole models through torch.compile(backend="ember") against PyTorch eager: forward,
backward, and 20 AdamW steps (torch.optim, in eager around the compiled model)."""
from __future__ import annotations

import copy

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch
import torch.nn.functional as F
from torch import nn

import ember.torch
from ember.bench.torch_resnet import ResNet18

STEPS = 20


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                                    nn.Linear(32, 5))

    def forward(self, x):
        return self.layers(x)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # (no bias before BatchNorm: it cancels, and Adam would amplify its rounding noise)
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.head(x.flatten(1))


def _train(model, x, y, steps: int = STEPS) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def _assert_trains_like_eager(model: nn.Module, x, y, noise: dict | None = None) -> None:
    """``noise`` maps a state name to the part of it left out of the comparison: a
    parameter whose gradient is zero but for rounding, which Adam amplifies to whole steps
    (the key's bias, which cancels in the softmax)."""
    eager = copy.deepcopy(model)
    compiled = ember.torch.compile(model)
    losses = _train(compiled, x, y)
    expected = _train(eager, x, y)
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
    assert losses[-1] < 0.5 * losses[0]  # it learned something
    for (name, value), reference in zip(model.state_dict().items(), eager.state_dict().values()):
        if name in (noise or {}):
            keep = torch.ones_like(value, dtype=torch.bool)
            keep[noise[name]] = False
            value, reference = value[keep], reference[keep]
        torch.testing.assert_close(value, reference, rtol=1e-4, atol=1e-4, msg=name)


def test_mlp_trains_like_eager():
    x, y = torch.randn(16, 12), torch.randint(0, 5, (16,))
    _assert_trains_like_eager(MLP(), x, y)


def test_cnn_with_batch_norm_trains_like_eager():
    x, y = torch.randn(6, 3, 8, 8), torch.randint(0, 10, (6,))
    model = CNN()
    _assert_trains_like_eager(model, x, y)
    assert model.bn1.num_batches_tracked.item() == STEPS


def test_gradients_match_eager():
    model = CNN()
    eager = copy.deepcopy(model)
    x = torch.randn(3, 3, 8, 8, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    torch.compile(model, backend="ember", dynamic=False)(x).square().sum().backward()
    eager(x_eager).square().sum().backward()
    torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_inference_in_eval_mode_under_no_grad():
    model = CNN()
    _train(model, torch.randn(6, 3, 8, 8), torch.randint(0, 10, (6,)), steps=3)
    model.eval()
    x = torch.randn(4, 3, 8, 8)
    compiled = ember.torch.compile(model)
    with torch.no_grad():
        out = compiled(x)
        expected = model(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


def test_in_place_ops_on_inputs_reach_the_caller():
    def update(buffer, x):
        buffer.mul_(0.5).add_(x)
        return (buffer * x).sum()

    buffer, x = torch.randn(4, 5), torch.randn(4, 5)
    expected_buffer = buffer.clone()
    expected = update(expected_buffer, x)
    out = ember.torch.compile(update)(buffer, x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(buffer, expected_buffer)


def test_a_new_shape_recompiles_with_static_shapes():
    model = MLP()
    compiled = ember.torch.compile(model)
    for batch in (3, 7, 3):
        x = torch.randn(batch, 12)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)


class GPTBlock(nn.Module):
    """A pre-norm transformer block with causal scaled_dot_product_attention."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        # (no qkv bias: the key's bias cancels in the softmax, and Adam would amplify the
        # rounding noise of its zero gradient)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))
        self.head = nn.Linear(width, 7)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, length, width))
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(dim=1))


def test_gpt_block_with_scaled_dot_product_attention_trains_like_eager():
    x, y = torch.randn(4, 6, 32), torch.randint(0, 7, (4,))
    _assert_trains_like_eager(GPTBlock(), x, y)


def test_multihead_attention_trains_like_eager():
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # (no bias: the key's cancels in the softmax, as in GPTBlock)
            self.attention = nn.MultiheadAttention(16, 2, batch_first=True, bias=False)
            self.head = nn.Linear(16, 3)

        def forward(self, x):
            y, _ = self.attention(x, x, x, need_weights=False)
            return self.head(y.mean(dim=1))

    x, y = torch.randn(4, 5, 16), torch.randint(0, 3, (4,))
    _assert_trains_like_eager(Attention(), x, y)


class LSTMClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


@torch._dynamo.config.patch(allow_rnn=True)  # (Dynamo traces into nn.LSTM)
def test_lstm_trains_like_eager():
    x, y = torch.randn(4, 5, 8), torch.randint(0, 3, (4,))
    _assert_trains_like_eager(LSTMClassifier(), x, y)


@torch._dynamo.config.patch(allow_rnn=True)
def test_lstm_inference_under_no_grad():
    model, x = LSTMClassifier().eval(), torch.randn(3, 7, 8)
    with torch.no_grad():
        torch.testing.assert_close(ember.torch.compile(model, fallback=False)(x), model(x),
                                   rtol=1e-5, atol=1e-6)


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)  # (an in-place op in the graph)
        y = self.bn2(self.conv2(y))
        y += x
        return F.relu(y)


class SmallResNet(nn.Module):
    """A ResNet-style net: a stem, two residual blocks (one strided down), global pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU())
        self.block1 = ResidualBlock(8)
        self.down = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(16), nn.ReLU())
        self.block2 = ResidualBlock(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.block2(self.down(self.block1(self.stem(x))))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def test_small_resnet_trains_like_eager_then_infers_in_eval_mode():
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    model = SmallResNet()
    _assert_trains_like_eager(model, x, y)  # (running statistics compared too)
    assert model.block2.bn2.num_batches_tracked.item() == STEPS
    model.eval()
    test_x = torch.randn(5, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(ember.torch.compile(model, fallback=False)(test_x),
                                   model(test_x), rtol=1e-4, atol=1e-5)


class GPT2Block(nn.Module):
    """A GPT-2-style block: a causal mask kept as a buffer and applied with masked_fill,
    fused qkv with bias, tanh GELU, and a buffer counting the forward calls in place."""

    def __init__(self, width: int = 32, heads: int = 4, length: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * width, width))
        self.head = nn.Linear(width, 7)
        self.register_buffer("mask", torch.tril(torch.ones(length, length, dtype=torch.bool)))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.calls += 1
        batch, length, width = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (k.shape[-1] ** 0.5)
        scores = scores.masked_fill(~self.mask[:length, :length], float("-inf"))
        y = scores.softmax(dim=-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).reshape(batch, length, width))
        x = x + self.mlp(self.ln_2(x))
        return self.head(x[:, -1])


def test_gpt2_style_block_trains_like_eager_and_counts_calls_in_its_buffer():
    x, y = torch.randn(4, 8, 32), torch.randint(0, 7, (4,))
    model = GPT2Block()
    # (the calls buffer compared with eager's too; the key's third of c_attn's bias is noise)
    _assert_trains_like_eager(model, x, y, noise={"c_attn.bias": slice(32, 64)})
    assert model.calls.item() == STEPS


class HuggingFaceGPT2(nn.Module):
    """Hugging Face's GPT2LMHeadModel, randomly initialized from a tiny config (nothing is
    downloaded), returning the next-token logits of every position."""

    def __init__(self, transformers) -> None:
        super().__init__()
        config = transformers.GPT2Config(
            vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=0, eos_token_id=0)
        self.gpt2 = transformers.GPT2LMHeadModel(config)

    def forward(self, ids):
        return self.gpt2(input_ids=ids).logits.flatten(0, 1)


def test_huggingface_gpt2_with_a_tiny_config_trains_like_eager():
    # (transformers is in the test extra; a tiny config, random init: nothing downloaded)
    model = HuggingFaceGPT2(pytest.importorskip("transformers"))
    ids = torch.randint(0, 64, (2, 9))
    x, y = ids[:, :-1], ids[:, 1:].flatten()
    # (the key's third of each layer's c_attn bias cancels in the softmax: noise)
    _assert_trains_like_eager(model, x, y, noise={
        f"gpt2.transformer.h.{layer}.attn.c_attn.bias": slice(32, 64) for layer in range(2)})
    explanation = ember.torch.explain(model, x)
    assert explanation.fallbacks == []


def test_resnet18_computes_eager_gradients_then_trains_and_infers_like_eager():
    """The first step's loss, gradients and running statistics against eager's; then
    20 AdamW steps that learn, and eval-mode inference with the trained weights. The
    trajectory itself is not compared: on 4 images eager's own two convolution paths
    (oneDNN on and off) part by whole Adam steps within three steps (their gradients
    differ by 1.5e-4 of each tensor's largest, as Ember's do from either)."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    model = ResNet18()
    assert sum(p.numel() for p in model.parameters()) == 11_181_642  # (torchvision's, 10 classes)
    eager = copy.deepcopy(model)
    compiled = ember.torch.compile(model)
    loss = F.cross_entropy(compiled(x), y)
    loss.backward()
    expected = F.cross_entropy(eager(x), y)
    expected.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    for (name, value), reference in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(value.grad, reference.grad, rtol=0, msg=name,
                                   atol=1e-3 * reference.grad.abs().max().item())
    for (name, value), reference in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(value, reference, rtol=1e-4, atol=1e-5, msg=name)
    model.zero_grad()
    losses = _train(compiled, x, y)
    assert losses[-1] < 0.5 * losses[0]
    model.eval()
    test_x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(ember.torch.compile(model, fallback=False)(test_x),
                                   model(test_x), rtol=1e-4, atol=1e-5)
