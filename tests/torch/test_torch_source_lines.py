"""The Ember programs compiled from a PyTorch model name the model's lines: kernels,
dumps and profiles point at ``forward``, not at torch.fx's interpreter."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch

import ember.torch


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x)).square().mean()  # the line every kernel names


def test_kernels_name_the_models_line(programs):
    torch.manual_seed(0)
    step = torch.compile(_Block(), backend=ember.torch.strict_backend, fullgraph=True)
    step(torch.randn(8, 32)).backward()
    assert len(programs) == 2  # (forward, backward)
    here = f"{os.path.basename(__file__)}:{_Block.forward.__code__.co_firstlineno + 1}"
    for program in programs:
        lines = {line for kernel in program.kernels for line in kernel.source_lines}
        assert here in lines, (here, lines)
        assert not any("interpreter.py" in line for line in lines), lines
