"""The PyTorch bridge: ``torch.compile(model, backend="ember")`` runs a PyTorch model on
Ember's compiler (forward and backward, with the ops Ember cannot lower left to PyTorch);
``ember.torch.lazy`` is the lazy-tensor device (ops recorded, compiled at ``mark_step()``).

PyTorch is an optional dependency, imported only here (``pip install "ember[torch]"``).
"""
from __future__ import annotations

from typing import Any

import torch
import torch._dynamo

from ember.torch.backend import ember_backend, strict_backend
from ember.torch import lazy
from ember.torch.explain import Explanation, Fallback, explain
from ember.torch.lazy import mark_step, to_lazy
from ember.torch.metrics import Metrics, metrics, reset_metrics

__all__ = ["Explanation", "Fallback", "Metrics", "compile", "ember_backend", "explain", "lazy",
           "mark_step", "metrics", "reset_metrics", "strict_backend", "to_lazy"]


def compile(model: Any, *, fallback: bool = True, **options: Any) -> Any:
    """``torch.compile(model, backend=ember)`` with static shapes; ``fallback=False`` makes
    an op Ember cannot lower an error instead of a PyTorch op."""
    options.setdefault("dynamic", False)
    return torch.compile(model, backend=ember_backend if fallback else strict_backend, **options)


# Installed, the package registers "ember" by its torch_dynamo_backends entry point; from
# a source tree, importing ember.torch registers it.
if "ember" not in torch._dynamo.list_backends(exclude_tags=()):
    torch._dynamo.register_backend(ember_backend, name="ember")
