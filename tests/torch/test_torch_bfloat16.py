"""bfloat16 through torch.compile(backend="ember") against PyTorch eager: tensors crossing
without a copy, torch.autocast("cpu", dtype=torch.bfloat16) training, and whole bfloat16
models, forward and training (every op compiled by Ember: no fallback)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
pytest.importorskip("ml_dtypes")
import torch
import torch.nn.functional as F
from torch import nn

import ember.torch
from ember import dtypes
from ember.torch.exchange import to_ember, to_torch

STEPS = 10
# bfloat16 keeps 8 bits of mantissa: results agree to a few of its ulps (2**-8 ~ 4e-3)
BF16 = {"rtol": 2e-2, "atol": 2e-2}


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(),
                         nn.Linear(32, 5))


class _CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.head(F.max_pool2d(F.relu(self.bn(self.conv(x))), 2).flatten(1))


def test_bfloat16_tensors_cross_without_a_copy():
    tensor = torch.randn(3, 4).bfloat16()
    array = to_ember(tensor)
    assert array.dtype == dtypes.bfloat16
    assert array.__array_interface__["data"][0] == tensor.data_ptr()
    back = to_torch(array)
    assert back.dtype == torch.bfloat16 and back.data_ptr() == tensor.data_ptr()
    assert np.array_equal(np.asarray(array, np.float32), tensor.float().numpy())


def _train(model: nn.Module, x, y, autocast: bool, adamw: bool) -> list[float]:
    # (Adam normalizes each update, so a parameter whose gradient is near zero moves by
    # the sign of bfloat16 rounding noise: AdamW's losses are compared, SGD's parameters)
    optimizer = (torch.optim.AdamW(model.parameters(), lr=1e-2) if adamw
                 else torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    losses = []
    for _ in range(STEPS):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("make_model, x_shape", [(_mlp, (16, 12)), (_CNN, (6, 3, 8, 8))],
                         ids=["mlp", "cnn"])
def test_autocast_bfloat16_trains_like_eager(make_model, x_shape):
    model, x = make_model(), torch.randn(x_shape)
    y = torch.randint(0, 5, (x.shape[0],))
    eager = copy.deepcopy(model)
    compiled = ember.torch.compile(model, fallback=False)  # (every op run by Ember)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = compiled(x), eager(x)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, **BF16)
    adamw_model, adamw_eager = copy.deepcopy(model), copy.deepcopy(model)
    losses = _train(ember.torch.compile(adamw_model, fallback=False), x, y, True, True)
    torch.testing.assert_close(losses, _train(adamw_eager, x, y, True, True), **BF16)
    assert losses[-1] < 0.7 * losses[0]
    losses, expected_losses = _train(compiled, x, y, True, False), _train(eager, x, y, True, False)
    torch.testing.assert_close(losses, expected_losses, **BF16)
    for (name, value), reference in zip(model.state_dict().items(), eager.state_dict().values()):
        assert value.dtype == reference.dtype == (torch.int64 if "num_batches" in name
                                                  else torch.float32)
        torch.testing.assert_close(value, reference, **BF16, msg=name)


def test_a_bfloat16_model_trains_like_eager():
    model = _mlp().to(torch.bfloat16)
    x, y = torch.randn(16, 12, dtype=torch.bfloat16), torch.randint(0, 5, (16,))
    eager = copy.deepcopy(model)
    compiled = ember.torch.compile(model, fallback=False)
    torch.testing.assert_close(compiled(x), eager(x), **BF16)
    adamw_model, adamw_eager = copy.deepcopy(model), copy.deepcopy(model)
    losses = _train(ember.torch.compile(adamw_model, fallback=False), x, y, False, True)
    torch.testing.assert_close(losses, _train(adamw_eager, x, y, False, True), **BF16)
    assert losses[-1] < 0.7 * losses[0]
    losses, expected_losses = _train(compiled, x, y, False, False), _train(eager, x, y, False, False)
    torch.testing.assert_close(losses, expected_losses, **BF16)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert p.dtype == torch.bfloat16
        torch.testing.assert_close(p, q, **BF16, msg=name)


def test_bfloat16_gradients_match_eager():
    model = _CNN().to(torch.bfloat16)
    eager = copy.deepcopy(model)
    x = torch.randn(3, 3, 8, 8, dtype=torch.bfloat16)
    ember.torch.compile(model, fallback=False)(x).float().square().sum().backward()
    eager(x).float().square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert p.grad.dtype == torch.bfloat16
        torch.testing.assert_close(p.grad, q.grad, rtol=5e-2, atol=5e-2, msg=name)
