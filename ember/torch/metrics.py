"""The PyTorch bridge's counters, as torch_xla's metrics report. For the lazy device:
graphs compiled, cache hits, ops run eagerly for want of a lowering, time spent executing
graphs, and the user's line behind each graph run that a needed value forced (outside
``mark_step``), which names what breaks a step into several graphs. For both: the
programs Ember compiled for ATen graphs (``graph_compiles``; for ``torch.compile``'s, one
per size or per power-of-two bucket of a dynamic size), and why a dynamic size was not
bucketed."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Metrics:
    compiles: int = 0
    cache_hits: int = 0
    executions: int = 0
    eager_fallbacks: int = 0
    execute_seconds: float = 0.0
    fallback_ops: set[str] = field(default_factory=set)
    forced_by: list[str] = field(default_factory=list)
    graph_compiles: int = 0
    refused_buckets: list[str] = field(default_factory=list)


_current = Metrics()


def metrics() -> Metrics:
    """The counters since the last ``reset_metrics()``."""
    return _current


def reset_metrics() -> None:
    """Zero the counters (compiled graphs stay cached)."""
    global _current
    _current = Metrics()
