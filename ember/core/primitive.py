"""Primitives and their rule tables.

A primitive is the unit every transformation and backend understands. Each is defined
in one place (a module under ``ember/ops``) by creating a ``Primitive`` and attaching
its rules with the decorators below. ``tests/ops/test_rules.py`` walks ``REGISTRY``
and fails if a rule is missing and not explicitly waived.

Rule signatures:
  abstract_eval(*avals, **params) -> ShapedArray | list[ShapedArray]
  impl(*numpy_arrays, **params)   -> np.ndarray | list[np.ndarray]   (the reference)
  jvp(primals, tangents, **params) -> (primal_out, tangent_out)      (lists if multiple_results)
  transpose(cotangents_out, *inputs, **params) -> list of cotangents, one per input
        (inputs that are linear are ``UndefinedPrimal``; return None for non-linear ones;
         cotangents_out is a single value, or a list when multiple_results)
  batch(values, batch_dims, **params) -> (outputs, out_batch_dims)
  sharding(query) -> ShardingDecision   (see ``ember.ops.sharding_rules``: how the
        equation is split over a mesh given what is known of its operands' and results'
        splits; the partitioner propagates with it and computes each shard with it)
"""
from __future__ import annotations

from typing import Any, Callable

REGISTRY: dict[str, "Primitive"] = {}


def _rule_setter(attribute: str) -> Callable[["Primitive", Callable], Callable]:
    """A method that keeps its argument, a rule, as ``attribute`` and returns it."""
    def define(self: "Primitive", fn: Callable) -> Callable:
        setattr(self, attribute, fn)
        return fn

    define.__name__ = "def_" + attribute.removesuffix("_rule")
    return define


class Primitive:
    def __init__(self, name: str, *, multiple_results: bool = False,
                 effectful: bool = False) -> None:
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} is defined twice")
        self.name = name
        self.multiple_results = multiple_results
        # Has an effect beyond its results (a debug print): passes keep it even when its
        # results are unused, never merge, fold, hoist or speculate it.
        self.effectful = effectful
        self.abstract_eval_rule: Callable | None = None
        self.impl_rule: Callable | None = None
        self.jvp_rule: Callable | None = None
        self.transpose_rule: Callable | None = None
        self.batch_rule: Callable | None = None
        self.sharding_rule: Callable | None = None
        # Independent equations of this primitive that share these params can run as one
        # (a communication bucket): (params, merge: list[Eqn] -> Eqn). See passes.bucketing.
        self.bucketing: tuple[tuple[str, ...], Callable] | None = None
        # Why a rule is intentionally absent, e.g. {"jvp": "integer-valued"}.
        self.waived: dict[str, str] = {}
        REGISTRY[name] = self

    def __repr__(self) -> str:
        return self.name

    def bind(self, *args: Any, **params: Any) -> Any:
        from ember.core.trace import bind

        return bind(self, args, params)

    # Decorators that attach rules; each returns the function unchanged.
    def_abstract_eval = _rule_setter("abstract_eval_rule")
    def_impl = _rule_setter("impl_rule")
    def_jvp = _rule_setter("jvp_rule")
    def_transpose = _rule_setter("transpose_rule")
    def_batch = _rule_setter("batch_rule")
    def_sharding = _rule_setter("sharding_rule")

    def def_bucketing(self, shared_params: tuple[str, ...], merge: Callable) -> None:
        """Let independent equations of this primitive that agree on ``shared_params``
        (and their operand's dtype and leading size) run as ``merge(eqns)``, one equation."""
        self.bucketing = (shared_params, merge)

    def waive(self, rule: str, reason: str) -> None:
        """Declare that ``rule`` ('jvp', 'transpose', 'batch', 'sharding') does not
        exist, and why. (The partitioner computes an equation without a sharding rule
        on whole, replicated operands.)"""
        self.waived[rule] = reason

    def abstract_eval(self, *avals: Any, **params: Any):
        if self.abstract_eval_rule is None:
            raise NotImplementedError(f"primitive {self.name} has no abstract eval rule")
        return self.abstract_eval_rule(*avals, **params)
