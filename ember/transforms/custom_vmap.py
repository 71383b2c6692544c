"""User-defined batching: ``ember.custom_batching.custom_vmap`` (as JAX's).

``@custom_vmap`` then ``@f.def_vmap`` on ``rule(axis_size, in_batched, *args) ->
(out, out_batched)``: under ``vmap`` the rule computes the whole batch, getting the
batched arguments with their batch on axis 0 (the others as they are) and ``in_batched``,
a list with one pytree of bools per argument; ``out_batched`` says the same of ``out``
(a bool stands for a whole subtree). Elsewhere ``f`` runs as written; derivatives are
those of ``f``'s body.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from ember.core.abstract import aval_of
from ember.core.pytree import PyTreeDef, broadcast_prefix, tree_flatten, tree_map, tree_unflatten
from ember.core.trace import is_tracing
from ember.errors import EmberTypeError, EmberValueError
from ember.ir.interpreter import bind_equation, eval_graph
from ember.ops import rules
from ember.ops.control_flow import map as lax_map
from ember.transforms.calls import call_primitive, stage_call
from ember.transforms.jvp import jvp_flat

__all__ = ["custom_vmap", "sequential_vmap"]

custom_vmap_call_p = call_primitive("custom_vmap_call")


class custom_vmap:
    """A function with its own batching rule (see the module docstring)."""

    def __init__(self, fun: Callable) -> None:
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._rule: Callable | None = None
        self.__name__ = getattr(fun, "__name__", "custom_vmap function")

    def def_vmap(self, rule: Callable) -> Callable:
        self._rule = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise EmberTypeError(f"{self.__name__}: custom_vmap functions take positional "
                                 "arguments only, as in JAX")
        if self._rule is None:
            raise EmberTypeError(f"no batching rule defined for custom_vmap function "
                                 f"{self.__name__}; define one with @{self.__name__}.def_vmap")
        if not is_tracing():
            return self._fun(*args)
        leaves, in_tree = tree_flatten(args)
        store: dict[str, PyTreeDef] = {}

        def flat(*xs: Any) -> list[Any]:
            out_leaves, store["out_tree"] = tree_flatten(self._fun(*tree_unflatten(in_tree, xs)))
            return out_leaves

        call, consts = stage_call(flat, [aval_of(x) for x in leaves])
        outs = custom_vmap_call_p.bind(*consts, *leaves, call=call, num_consts=len(consts),
                                       rule=_FlatRule(self._rule, in_tree, store, self.__name__),
                                       name=self.__name__)
        return tree_unflatten(store["out_tree"], outs)


class _FlatRule:
    """The user's rule on flat leaves: ``(axis_size, batched flags, leaves) -> (out leaves,
    their flags)``."""

    def __init__(self, rule: Callable, in_tree: PyTreeDef, store: dict, name: str) -> None:
        self.rule, self.in_tree, self.store, self.name = rule, in_tree, store, name

    def __call__(self, axis_size: int, batched: Sequence[bool], leaves: Sequence[Any]
                 ) -> tuple[list[Any], list[bool]]:
        in_batched = list(tree_unflatten(self.in_tree, list(batched)))
        result = self.rule(axis_size, in_batched, *tree_unflatten(self.in_tree, leaves))
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise EmberTypeError(f"the vmap rule of {self.name} must return a pair "
                                 "(out, out_batched)")
        out, out_batched = result
        out_leaves, out_tree = tree_flatten(out)
        if out_tree != self.store["out_tree"]:
            raise EmberTypeError(f"the vmap rule of {self.name} returned an output structured "
                                 f"as {out_tree}; the function returns {self.store['out_tree']}")
        flags = _broadcast_flags(out_batched, out_tree, self.name)
        return out_leaves, flags


def _broadcast_flags(out_batched: Any, out_tree: PyTreeDef, name: str) -> list[bool]:
    """One bool per output leaf from ``out_batched``, a prefix of the output's structure."""
    try:
        flags = broadcast_prefix(out_batched, tree_unflatten(out_tree, [0] * out_tree.num_leaves))
    except ValueError:
        raise EmberTypeError(f"the vmap rule of {name} returned out_batched structured as "
                             f"{tree_flatten(out_batched)[1]}, which is not a prefix of the "
                             f"output's structure {out_tree}") from None
    for flag in tree_flatten(out_batched)[0]:
        if not isinstance(flag, bool):
            raise EmberTypeError(f"the vmap rule of {name}: out_batched must hold bools, "
                                 f"got {type(flag).__name__}")
    return flags


def _custom_vmap_batch(values, dims, *, call, num_consts, rule, name):
    if any(d is not None for d in dims[:num_consts]):
        raise EmberTypeError(f"{name} closes over a value that vmap batches; a custom_vmap "
                             "function must take every batched value as an argument")
    size = rules.batch_size(values, dims)
    args = [v if d is None else rules.move_batch_axis(v, d, 0, size)
            for v, d in zip(values[num_consts:], dims[num_consts:])]
    outs, flags = rule(size, [d is not None for d in dims[num_consts:]], args)
    for out, batched, aval in zip(outs, flags, call.out_avals):
        want = (size, *aval.shape) if batched else aval.shape
        if tuple(aval_of(out).shape) != want:
            raise EmberValueError(f"the vmap rule of {name} returned an output of shape "
                                  f"{tuple(aval_of(out).shape)} marked "
                                  f"{'batched' if batched else 'unbatched'}; expected {want}")
    return list(outs), [0 if batched else None for batched in flags]


def _custom_vmap_jvp(primals, tangents, *, call, num_consts, rule, name):
    return jvp_flat(lambda *xs: eval_graph(call, xs, bind_equation), primals,
                    [rules.instantiate(t) for t in tangents])


custom_vmap_call_p.def_batch(_custom_vmap_batch)
custom_vmap_call_p.def_jvp(_custom_vmap_jvp)
custom_vmap_call_p.waive("transpose", "not linear (its body is differentiated instead)")


def sequential_vmap(fun: Callable) -> custom_vmap:
    """``fun`` batched by a loop over the batch (``ember.lax.map``), as JAX's: for code
    that cannot be vectorized, such as a host callback."""
    f = custom_vmap(fun)

    @f.def_vmap
    def rule(axis_size: int, in_batched: list, *args: Any):
        batched_args = [a for a, b in zip(args, in_batched) if _all_true(b)]

        def one(xs: Sequence[Any]) -> Any:
            it = iter(xs)
            return fun(*[next(it) if _all_true(b) else a for a, b in zip(args, in_batched)])

        out = lax_map(one, batched_args)
        return out, tree_map(lambda _: True, out)

    return f


def _all_true(flags: Any) -> bool:
    leaves = tree_flatten(flags)[0]
    if any(leaves) and not all(leaves):
        raise EmberTypeError("sequential_vmap: an argument is partly batched; batch all of "
                             "its leaves or none")
    return bool(leaves) and all(leaves)
