"""The kernels Ember compiles for PyTorch use PyTorch's thread count: an OpenMP team of
every core beside single-threaded eager ops spends the step waiting for itself."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("torch.fx")  # (not "torch": without it, this folder imports as "torch")
import torch

import ember.torch
from ember.config import config

# ember_gemm_f32(split, parts, ...): parts is the size of the OpenMP team of the call
_GEMM_PARTS = re.compile(r"ember_gemm_f(?:32|64)\(\d+, (\d+),")
_TEAM = re.compile(r"num_threads\((\d+)\)")


@pytest.fixture
def torch_threads():
    """Sets PyTorch's intra-op thread count for the test, restored after it."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _teams(program) -> set[int]:
    """The team sizes of a program's GEMM calls and parallel loops."""
    sizes = set()
    for kernel in program.kernels:
        sizes |= {int(n) for n in _GEMM_PARTS.findall(kernel.source)}
        sizes |= {int(n) for n in _TEAM.findall(kernel.source)}
    return sizes


def _train_step(model, x):
    """Loss and parameter gradients of one step of ``model`` (compiled or not)."""
    model.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 64))


def test_kernels_follow_torch_threads_and_match_eager(programs, torch_threads):
    x = torch.randn(64, 256)
    eager, compiled = _mlp(), _mlp()
    step = torch.compile(compiled, backend=ember.torch.strict_backend, fullgraph=True)
    torch_threads(1)
    loss, grads = _train_step(step, x)
    assert len(programs) == 2  # (forward, backward)
    assert all(_teams(p) == {1} for p in programs), [_teams(p) for p in programs]
    assert sum(k.kind == "library" for p in programs for k in p.kernels) >= 4
    expected_loss, expected_grads = _train_step(eager, x)
    np.testing.assert_allclose(loss.numpy(), expected_loss.numpy(), rtol=1e-5)
    for got, want in zip(grads, expected_grads):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-6)

    torch_threads(2)  # the same module compiles again for the new count
    _train_step(step, x)
    assert len(programs) == 4
    assert any(2 in _teams(p) for p in programs[2:])


def test_embers_own_thread_setting_wins(programs, torch_threads):
    torch_threads(1)
    step = torch.compile(_mlp(), backend=ember.torch.strict_backend, fullgraph=True)
    with config.override(num_threads=2):
        _train_step(step, torch.randn(64, 256))
    assert any(2 in _teams(p) for p in programs)
