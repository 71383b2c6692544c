"""The primitive a ``checkify.check`` inside ``checkify`` stages: ``check(pred, *values)``.

It has no results and an effect, so tracing keeps it wherever the check was written,
also inside a ``lax.cond`` branch or a loop body; ``checkify`` then turns each one into
error values (``_functionalize``), so no compiled program ever holds one. Under ``vmap``
a check holds when it holds for every element, and reports the last element that fails
(as JAX's); under differentiation it checks the primal values.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ember.core.primitive import Primitive
from ember.core.pytree import PyTreeDef, tree_unflatten
from ember.core.source_info import SourceInfo
from ember.errors import EmberError
from ember.ops.rules import batch_size, move_batch_axis


_ignored = [0]  # how many calls of custom derivative rules are open whose checks are ignored


@contextmanager
def checks_ignored() -> Iterator[None]:
    """``check`` does nothing inside: a custom rule's checks, when the checks reported
    are those of the function it differentiates (``_functionalize``)."""
    _ignored[0] += 1
    try:
        yield
    finally:
        _ignored[0] -= 1


def ignoring_checks() -> bool:
    return bool(_ignored[0])


class JaxRuntimeError(EmberError, ValueError):
    """A failed check (JAX's name and kind of error)."""


@dataclass(frozen=True)
class CheckSite:
    """What a check records besides its arrays: the message, its values' structure, and
    for an automatic check the user's line (user checks end with JAX's suffix instead)."""

    msg: str
    fmt_tree: PyTreeDef
    automatic: bool = False
    source: SourceInfo | None = None

    def message(self, values: list[Any]) -> str:
        args, kwargs = tree_unflatten(self.fmt_tree, values)
        text = self.msg.format(*args, **kwargs)
        if not self.automatic:
            return f"{text} (`check` failed)"
        return f"{text} (at {self.source})" if self.source is not None else text

    def __repr__(self) -> str:
        return f"check({self.msg!r})"


check_p = Primitive("checkify_check", multiple_results=True, effectful=True)


@check_p.def_abstract_eval
def _check_abstract(pred, *values, site):
    return []


@check_p.def_impl
def _check_impl(pred, *values, site):
    if not bool(np.asarray(pred)):  # (reached only when a graph holding it runs as is)
        raise JaxRuntimeError(site.message([np.asarray(v) for v in values]))
    return []


@check_p.def_jvp
def _check_jvp(primals, tangents, *, site):
    check_p.bind(*primals, site=site)  # the values, not their tangents
    return [], []


check_p.waive("transpose", "it has no results (its operands are primal values)")
check_p.waive("sharding", "checkify turns it into error values before partitioning")


@check_p.def_batch
def _check_batch(values, dims, *, site):
    import ember.numpy as jnp

    size = batch_size(values, dims)
    pred = move_batch_axis(values[0], dims[0], 0, size)
    # The last element that fails, as JAX's checkify picks (the last one when none does).
    last = size - 1 - jnp.argmin(jnp.flip(pred, 0))
    picked = [v if d is None else jnp.take(move_batch_axis(v, d, 0, size), last, axis=0)
              for v, d in zip(values[1:], dims[1:])]
    check_p.bind(jnp.all(pred), *picked, site=site)
    return [], []
