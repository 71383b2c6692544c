"""Fixtures of the PyTorch bridge's tests: a fresh Dynamo for every test. Without PyTorch
the folder is skipped (each module also skips itself)."""
from __future__ import annotations

import pytest

try:
    import torch.fx  # (not just torch: without PyTorch, this folder imports as "torch")
except ImportError:
    torch = None
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()
