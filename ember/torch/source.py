"""The user's line behind an ATen graph's node, for errors, logs and the Ember program."""
from __future__ import annotations

import re

import torch.fx

from ember.core.source_info import SourceInfo

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


def node_source(node: torch.fx.Node) -> str:
    """The user's line that made ``node`` (the last frame of its stack trace), if known."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines()]
    frames = [line for line in lines if line.startswith("File")]
    return frames[-1] if frames else ""


def node_location(node: torch.fx.Node) -> SourceInfo | None:
    """``node_source`` as the source location of the Ember equations lowered from
    ``node``, so that kernels, dumps and profiles name the model's line, not the FX
    interpreter's (None if unknown)."""
    match = _FRAME.search(node_source(node))
    return SourceInfo(match["file"], int(match["line"]), match["function"]) if match else None
