"""The transformations that higher-order primitives (cond, while_loop, scan, the
cumulative ops) apply to their bodies: vmap, jvp, partial evaluation and transposition;
and vmap's trace type, by which a collective finds the frame of its named axis.

``ember.transforms`` sits above ``ember.ops`` in the layers, so the ops do not import
it: it hands its functions in here when it is imported (``ember/transforms/__init__.py``,
loaded by ``import ember``), and the ops' rules call them as ``transformations.vmap``.
"""
from __future__ import annotations

from typing import Any, Callable

from ember.core.primitive import Primitive

# A primitive's rule for partial evaluation (see ember.transforms.partial_eval).
partial_eval_rules: dict[Primitive, Callable[..., Any]] = {}

vmap: Callable[..., Callable]
batch_trace: type  # vmap's trace type: a collective finds the batch frame of its axis
rule_axis: Callable[[int], Any]
jvp_flat: Callable[..., tuple]
partial_eval_graph: Callable[..., tuple]
backward_pass: Callable[..., list]


def install(**functions: Callable) -> None:
    """Called once by ember.transforms with the functions annotated above."""
    assert set(functions) == set(__annotations__) - {"partial_eval_rules"}, functions
    globals().update(functions)
