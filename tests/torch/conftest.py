"""Fixtures of the PyTorch bridge's tests: a fresh Dynamo for every test, and the Ember
programs a test compiles. Without PyTorch the folder is skipped (each module also skips
itself)."""
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


@pytest.fixture
def programs(monkeypatch):
    """The Compiled programs of the graphs Ember compiles in the test, in order."""
    from ember.torch import program_call

    compiled = []
    init = program_call.ProgramCall.__init__

    def record(self, program, *args, **kwargs):
        compiled.append(program)
        init(self, program, *args, **kwargs)

    monkeypatch.setattr(program_call.ProgramCall, "__init__", record)
    return compiled
