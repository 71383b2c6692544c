"""The user's line behind an ATen graph's node, for errors and logs."""
from __future__ import annotations

import torch.fx


def node_source(node: torch.fx.Node) -> str:
    """The user's line that made ``node`` (the last frame of its stack trace), if known."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines()]
    frames = [line for line in lines if line.startswith("File")]
    return frames[-1] if frames else ""
