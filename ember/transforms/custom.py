"""User-defined derivatives: ``ember.custom_jvp`` and ``ember.custom_vjp`` (JAX semantics).

Called outside every transformation, the function simply runs. Under a transformation
it is bound as a call primitive holding the traced body and the user's rules, so the
rule is used whenever the call is differentiated (even if that happens after staging,
as for a ``scan`` body). The custom rules define derivatives with respect to the
explicit arguments only: differentiating with respect to a value the function closes
over is an error (pass it as an argument instead).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive
from ember.core.pytree import PyTreeDef, tree_flatten, tree_unflatten
from ember.core.trace import find_top_trace, is_tracing
from ember.errors import EmberTypeError
from ember.ops import rules
from ember.ops.rules import Zero, float0, instantiate
from ember.transforms.calls import call_primitive, stage_call
from ember.transforms.jvp import has_tangent
from ember.transforms.partial_eval import PartialEvalTrace, PETracer
from ember.transforms.vmap import BatchTracer, batch_graph, vmap_flat

__all__ = ["custom_jvp", "custom_vjp", "linear_map", "linearizing"]


class _CustomFunction:
    """What custom_jvp and custom_vjp share: argument handling and staging of the body.

    Attributes are private and prefixed so that ``functools.wraps`` of an instance (which
    copies its ``__dict__``) cannot clobber a wrapper's own attributes.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self._fun = fun
        self._nondiff_argnums = tuple(nondiff_argnums)
        self.__name__ = getattr(fun, "__name__", "custom function")

    def _bind(self, prim: Primitive, args: tuple, kwargs: dict,
              rules_of: Callable[[tuple, PyTreeDef, dict], dict[str, Any]]) -> Any:
        """The function's result: run as it is outside every transformation, else ``prim``
        bound on its staged body with the rule params ``rules_of(nondiff, in_tree,
        store)`` gives (``store`` gets the output tree when the body is staged)."""
        args = self._positional(args, kwargs)
        if not is_tracing():
            return self._fun(*args)
        nondiff, leaves, in_tree = self._split(args)
        store: dict[str, Any] = {}
        call, consts = stage_call(self._flat_fun(nondiff, in_tree, store),
                                  [aval_of(x) for x in leaves])
        outs = prim.bind(*consts, *leaves, call=call, num_consts=len(consts),
                         **rules_of(nondiff, in_tree, store), name=self.__name__)
        return tree_unflatten(store["out_tree"], outs)

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        if not kwargs:
            return args
        bound = inspect.signature(self._fun).bind(*args, **kwargs)
        bound.apply_defaults()
        if bound.kwargs:
            raise EmberTypeError(f"{self.__name__}: keyword-only arguments are not supported "
                                 "by custom_jvp / custom_vjp functions")
        return tuple(bound.args)

    def _split(self, args: tuple) -> tuple[tuple, list[Any], PyTreeDef]:
        for n in self._nondiff_argnums:
            if not 0 <= n < len(args):
                raise EmberTypeError(f"{self.__name__}: nondiff_argnums {n} is out of range "
                                     f"for {len(args)} arguments")
        nondiff = tuple(args[n] for n in self._nondiff_argnums)
        dyn = tuple(a for i, a in enumerate(args) if i not in self._nondiff_argnums)
        leaves, in_tree = tree_flatten(dyn)
        return nondiff, leaves, in_tree

    def _merge(self, nondiff: tuple, dyn: Sequence[Any]) -> list[Any]:
        it_nondiff, it_dyn = iter(nondiff), iter(dyn)
        total = len(nondiff) + len(dyn)
        return [next(it_nondiff) if i in self._nondiff_argnums else next(it_dyn)
                for i in range(total)]

    def _flat_fun(self, nondiff: tuple, in_tree: PyTreeDef, store: dict) -> Callable:
        def flat(*leaves: Any) -> list[Any]:
            out = self._fun(*self._merge(nondiff, tree_unflatten(in_tree, leaves)))
            out_leaves, store["out_tree"] = tree_flatten(out)
            return out_leaves

        return flat


def _check_closure_tangents(name: str, tangents: Sequence[Any]) -> None:
    if any(not isinstance(t, Zero) for t in tangents):
        raise EmberTypeError(
            f"{name} is differentiated with respect to a value it closes over; its custom "
            "rule only covers its explicit arguments. Pass that value as an argument.")


def _user_tangents(primals: Sequence[Any], tangents: Sequence[Any]) -> list[Any]:
    """Tangents as rules see them: arrays, float0 zeros for integer arguments."""
    return [instantiate(t) if has_tangent(aval_of(p)) else np.zeros(np.shape(p), float0)
            for p, t in zip(primals, tangents)]


# --- custom_jvp -----------------------------------------------------------------------

custom_jvp_call_p = call_primitive("custom_jvp_call")


class custom_jvp(_CustomFunction):
    """A function with a custom JVP rule: ``@custom_jvp`` then ``@f.defjvp`` on
    ``jvp(primals, tangents) -> (primal_out, tangent_out)`` (with ``nondiff_argnums``,
    ``jvp(*nondiff_args, primals, tangents)``). Reverse mode works through it too: the
    rule's tangent computation is linearized and transposed."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        super().__init__(fun, nondiff_argnums)
        self._jvp_rule: Callable | None = None

    def defjvp(self, jvp: Callable) -> Callable:
        self._jvp_rule = jvp
        return jvp

    def defjvps(self, *tangent_fns: Callable | None) -> None:
        """One function per argument: ``fn(tangent, primal_out, *primals)`` gives that
        argument's contribution to the output tangent (None: no contribution)."""

        def jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
            out = self._fun(*primals)
            total: Any = None
            for fn, t in zip(tangent_fns, tangents):
                if fn is not None:
                    term = fn(t, out, *primals)
                    total = term if total is None else total + term
            return out, total

        self.defjvp(jvp)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._jvp_rule is None:
            raise EmberTypeError(f"no JVP rule defined for custom_jvp function "
                                 f"{self.__name__}; define one with @{self.__name__}.defjvp")
        return self._bind(custom_jvp_call_p, args, kwargs,
                          lambda *staged: {"jvp": self._flat_jvp(*staged)})

    def _flat_jvp(self, nondiff: tuple, in_tree: PyTreeDef, store: dict) -> Callable:
        def flat_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
            out = self._jvp_rule(*nondiff, tuple(tree_unflatten(in_tree, primals)),
                           tuple(tree_unflatten(in_tree, tangents)))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise EmberTypeError(f"the JVP rule of {self.__name__} must return a pair "
                                     "(primal_out, tangent_out)")
            out_leaves, out_tree = tree_flatten(out[0])
            t_leaves, t_tree = tree_flatten(out[1])
            if out_tree != store["out_tree"] or t_tree != out_tree:
                raise EmberTypeError(
                    f"the JVP rule of {self.__name__} returned primal and tangent outputs "
                    f"structured as {out_tree} and {t_tree}; both must match the "
                    f"function's output {store['out_tree']}")
            return out_leaves, t_leaves

        return flat_jvp


def _custom_jvp_call_jvp(primals, tangents, *, call, num_consts, jvp, name):
    _check_closure_tangents(name, tangents[:num_consts])
    args = primals[num_consts:]
    outs, t_outs = jvp(args, _user_tangents(args, tangents[num_consts:]))
    for out, t, aval in zip(outs, t_outs, call.out_avals):
        if has_tangent(aval) and tuple(np.shape(t)) != aval.shape:
            raise EmberTypeError(f"the JVP rule of {name} returned a tangent of shape "
                                 f"{tuple(np.shape(t))} for an output of shape {aval.shape}")
    return outs, [t if has_tangent(a) else None for t, a in zip(t_outs, call.out_avals)]


custom_jvp_call_p.def_jvp(rules.accepts_symbolic_zeros(_custom_jvp_call_jvp))


def _custom_jvp_call_batch(values, dims, *, call, num_consts, jvp, name):
    size = rules.batch_size(values, dims)
    batched_call, _ = batch_graph(call, size, dims, out_dim=0)
    arg_dims = list(dims[num_consts:])

    def batched_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
        n = len(primals)

        def both(*xs: Any) -> list[Any]:
            outs, t_outs = jvp(xs[:n], xs[n:])  # integer outputs: their tangent is unused
            return [*outs, *(t if has_tangent(aval_of(o)) else o for o, t in zip(outs, t_outs))]

        t_dims = [d if has_tangent(aval_of(p)) else None for p, d in zip(primals, arg_dims)]
        outs, _ = vmap_flat(both, size, [*primals, *tangents], [*arg_dims, *t_dims], 0)
        return outs[:len(outs) // 2], outs[len(outs) // 2:]

    outs = custom_jvp_call_p.bind(*values, call=batched_call, num_consts=num_consts,
                                  jvp=batched_jvp, name=name)
    return outs, [0] * len(outs)


custom_jvp_call_p.def_batch(_custom_jvp_call_batch)
custom_jvp_call_p.waive("transpose", "not linear (its JVP rule is linearized instead)")


# --- custom_vjp -----------------------------------------------------------------------

custom_vjp_call_p = call_primitive("custom_vjp_call")


class custom_vjp(_CustomFunction):
    """A function with a custom VJP: ``@custom_vjp`` then ``f.defvjp(fwd, bwd)`` with
    ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, cotangent) -> tuple`` of one
    cotangent per argument (with ``nondiff_argnums``, ``bwd(*nondiff_args, res, ct)``,
    returning cotangents for the other arguments). Forward mode (jvp) is not available
    for such functions, as in JAX."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        super().__init__(fun, nondiff_argnums)
        self._fwd: Callable | None = None
        self._bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        self._fwd, self._bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._fwd is None:
            raise EmberTypeError(f"no VJP defined for custom_vjp function {self.__name__}; "
                                 f"define one with {self.__name__}.defvjp(fwd, bwd)")
        return self._bind(custom_vjp_call_p, args, kwargs,
                          lambda *staged: dict(zip(("fwd", "bwd"), self._flat_fwd_bwd(*staged))))

    def _flat_fwd_bwd(self, nondiff: tuple, in_tree: PyTreeDef,
                      store: dict) -> tuple[Callable, Callable]:
        name = self.__name__

        def fwd(*primals: Any) -> tuple[list, list]:
            out = self._fwd(*self._merge(nondiff, tree_unflatten(in_tree, primals)))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise EmberTypeError(f"the fwd rule of {name} must return a pair "
                                     "(output, residuals)")
            out_leaves, out_tree = tree_flatten(out[0])
            if out_tree != store["out_tree"]:
                raise EmberTypeError(f"the fwd rule of {name} returned an output structured "
                                     f"as {out_tree}; the function returns "
                                     f"{store['out_tree']}")
            res_leaves, store["res_tree"] = tree_flatten(out[1])
            return out_leaves, res_leaves

        def bwd(res: Sequence[Any], cts: Sequence[Any]) -> list[Any]:
            ct = tree_unflatten(store["out_tree"], cts)
            result = self._bwd(*nondiff, tree_unflatten(store["res_tree"], res), ct)
            return _bwd_leaves(result, in_tree, name)

        return fwd, bwd


def _bwd_leaves(result: Any, in_tree: PyTreeDef, name: str) -> list[Any]:
    """The bwd rule's cotangents, one per argument leaf (None: zero)."""
    if not isinstance(result, (tuple, list)) or len(result) != len(in_tree.children):
        raise EmberTypeError(
            f"the bwd rule of {name} must return a tuple with one cotangent per "
            f"differentiable argument ({len(in_tree.children)}), got "
            f"{type(result).__name__} {tree_flatten(result)[1]}")
    leaves: list[Any] = []
    for i, (sub, arg_tree) in enumerate(zip(result, in_tree.children)):
        if sub is None:
            leaves.extend([None] * arg_tree.num_leaves)
            continue
        sub_leaves, sub_tree = tree_flatten(sub, is_leaf=lambda x: x is None)
        if sub_tree != arg_tree:
            raise EmberTypeError(f"the bwd rule of {name} returned a cotangent structured as "
                                 f"{sub_tree} for argument {i}, structured as {arg_tree}")
        leaves.extend(sub_leaves)
    return leaves


def _custom_vjp_call_jvp(primals, tangents, *, call, num_consts, fwd, bwd, name):
    _check_closure_tangents(name, tangents[:num_consts])
    args, arg_tangents = primals[num_consts:], tangents[num_consts:]
    outs, res = fwd(*args)
    live = [t for t in arg_tangents if not isinstance(t, Zero)]
    if not live:
        return outs, None
    if not isinstance(find_top_trace(live), PartialEvalTrace):
        raise EmberTypeError(f"cannot use forward-mode differentiation (jvp, jacfwd) on "
                             f"{name}: it is a custom_vjp function, which defines reverse "
                             "mode only. Use ember.custom_jvp for forward mode.")
    out_avals = tuple(aval_of(o) for o in outs)
    diff = tuple(has_tangent(aval_of(a)) for a in args)
    lin_in = [instantiate(t) for t, d in zip(arg_tangents, diff) if d]
    t_outs = custom_lin_p.bind(*res, *lin_in, num_res=len(res), bwd=bwd, out_avals=out_avals,
                               diff=diff, name=name)
    return outs, [t if has_tangent(a) else None for t, a in zip(t_outs, out_avals)]


custom_vjp_call_p.def_jvp(rules.accepts_symbolic_zeros(_custom_vjp_call_jvp))


def _custom_vjp_call_batch(values, dims, *, call, num_consts, fwd, bwd, name):
    size = rules.batch_size(values, dims)
    batched_call, _ = batch_graph(call, size, dims, out_dim=0)
    arg_dims = list(dims[num_consts:])
    arg_avals = call.in_avals[num_consts:]
    split: dict[str, int] = {}

    def batched_fwd(*primals: Any) -> tuple[list, list]:
        def both(*xs: Any) -> list[Any]:
            outs, res = fwd(*xs)
            split["n"] = len(outs)
            return [*outs, *res]

        flat, _ = vmap_flat(both, size, primals, arg_dims, 0)
        return flat[:split["n"]], flat[split["n"]:]

    def batched_bwd(res: Sequence[Any], cts: Sequence[Any]) -> list[Any]:
        def one(*xs: Any) -> list[Any]:
            got = bwd(xs[:len(res)], xs[len(res):])
            return [rules.zeros_like_aval(a) if c is None else c for c, a in zip(got, arg_avals)]

        return vmap_flat(one, size, [*res, *cts], [0] * (len(res) + len(cts)), 0)[0]

    outs = custom_vjp_call_p.bind(*values, call=batched_call, num_consts=num_consts,
                                  fwd=batched_fwd, bwd=batched_bwd, name=name)
    return outs, [0] * len(outs)


custom_vjp_call_p.def_batch(_custom_vjp_call_batch)
custom_vjp_call_p.waive("transpose", "not linear (its fwd/bwd rules are used instead)")


# custom_lin(*residuals, *tangents): the linear map whose transpose is a custom_vjp
# function's bwd rule. It exists only between linearization and transposition.
custom_lin_p = Primitive("custom_lin", multiple_results=True)
custom_lin_p.def_abstract_eval(lambda *avals, out_avals, **params: list(out_avals))


@custom_lin_p.def_impl
def _custom_lin_impl(*args, name, **params):
    raise EmberTypeError(f"cannot evaluate the forward derivative of custom_vjp function "
                         f"{name}; use ember.custom_jvp for forward mode")


@custom_lin_p.def_transpose
def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, diff, name):
    cts_all = bwd(args[:num_res], cts)
    return [None] * num_res + [c for c, d in zip(cts_all, diff) if d]


custom_lin_p.waive("jvp", "it is only transposed (reverse mode), never differentiated")


@custom_lin_p.def_batch
def _custom_lin_batch(values, dims, *, num_res, bwd, out_avals, diff, name):
    """Mapped inside a linearization (``grad`` of a ``vmap``): every operand mapped at
    axis 0, and the transpose ``bwd`` mapped over the residuals and cotangents."""
    size = rules.batch_size(values, dims)
    moved = [rules.move_batch_axis(v, d, 0, size) for v, d in zip(values, dims)]
    lin_avals = [aval_of(v) for v in values[num_res:]]
    wanted = [i for i, d in enumerate(diff) if d]

    def batched_bwd(res: Sequence[Any], cts: Sequence[Any]) -> list[Any]:
        def one(*xs: Any) -> list[Any]:
            got = bwd(xs[:num_res], xs[num_res:])
            return [rules.zeros_like_aval(a) if got[i] is None else got[i]
                    for i, a in zip(wanted, lin_avals)]

        mapped = iter(vmap_flat(one, size, [*res, *cts], [0] * (len(res) + len(cts)), 0)[0])
        return [next(mapped) if d else None for d in diff]

    batched_avals = tuple(ShapedArray((size, *a.shape), a.dtype) for a in out_avals)
    outs = custom_lin_p.bind(*moved, num_res=num_res, bwd=batched_bwd, out_avals=batched_avals,
                             diff=diff, name=name)
    return outs, [0] * len(outs)
custom_lin_p.waive("sharding", "only transposed (reverse mode), never in a program to partition")


def linearizing(tangents: Sequence[Any]) -> bool:
    """Whether ``tangents`` are being linearized (reverse mode), not evaluated: unknown
    values of a partial evaluation, possibly mapped by a ``vmap`` inside it."""
    def unknown(value: Any) -> bool:
        while isinstance(value, BatchTracer):
            value = value.value
        return isinstance(value, PETracer) and not value.is_known

    return any(unknown(t) for t in tangents if not isinstance(t, Zero))


def linear_map(res: Sequence[Any], tangent: Any, transpose: Callable, like: Any,
               name: str) -> Any:
    """A linear map of ``tangent`` (shaped as ``like``) known only by its ``transpose(res,
    cts) -> cotangent leaves``: the linear part of a custom rule in reverse mode (what
    ``lax.custom_linear_solve``'s ``transpose_solve`` gives)."""
    leaves, _ = tree_flatten(tangent)
    like_leaves, like_tree = tree_flatten(like)
    out_avals = tuple(aval_of(x) for x in like_leaves)
    res = list(res)
    outs = custom_lin_p.bind(*res, *leaves, num_res=len(res),
                             bwd=lambda r, cts: [*[None] * len(r), *transpose(r, cts)],
                             out_avals=out_avals, diff=(False,) * len(res) + (True,) * len(leaves),
                             name=name)
    return tree_unflatten(like_tree, outs)
