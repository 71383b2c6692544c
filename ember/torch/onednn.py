"""oneDNN off while PyTorch decomposes an RNN: with it on, an LSTM (one that takes no
input gradient, or any on the lazy device) runs as oneDNN's kernel, one opaque op with no
lowering; off, as the cell's matmuls and elementwise ops, which Ember compiles."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def onednn_off() -> Iterator[None]:
    # (torch._C's switch: torch.backends' refuses once a test harness has frozen the
    # global flags, torch.testing's does)
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)
