"""checkify's interpreter: a staged function run equation by equation, its checks
turned into error values.

The error state is JAX's: a flag (some check failed), the code of the first check that
failed, in the order the program ran them, and for each check the values of its
message. Each equation is bound again (so an outer ``jit`` stages the checked program
and an outer ``vmap`` maps it), then the checks asked for are applied to it: the user's
``check`` equations (``_user_check``) and the automatic checks (``_automatic_checks``).

Control flow is checked inside: a ``cond`` branch or a ``scan`` / ``while_loop`` body is
first run through this interpreter on its own (which finds its checks and the shapes of
their values), then the control flow is staged again with the error state as extra
results (``cond``) or as part of the carry (loops), so a check fails in the iteration,
or the branch taken, where it fails (a ``while_loop``'s ``cond_fun`` too). A ``checkpoint``
body is run in line. A ``custom_jvp`` / ``custom_vjp`` function is checked as its body
runs, its error state extra results of the call; when the call is differentiated later
(``grad(checkify(f))``), the error is still the body's (recomputed from the primal
values, the custom rule's own checks ignored), so differentiating a checkified function
does not change its error.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

import ember.numpy as jnp
from ember.core.pytree import register_pytree_node, tree_flatten
from ember.core.source_info import source_override
from ember.core.staging import hoist_consts, trace_to_graph
from ember.errors import EmberValueError
from ember.experimental import _automatic_checks as automatic
from ember.experimental._user_check import CheckSite, check_p, checks_ignored
from ember.ir.graph import Eqn, Graph, Literal, subgraphs
from ember.ir.interpreter import bind_equation, eval_graph


class FailedCheckError:
    """The error type of ``check``: ``errors=`` sets hold such types, as in JAX."""


@dataclass
class State:
    """``err``: a check failed; ``code``: the first that failed (its index among the
    sites); ``slots``: by site, the values its message is formatted with."""

    err: Any
    code: Any
    slots: dict[int, list[Any]]


register_pytree_node(State, lambda s: ((s.err, s.code, s.slots), None),
                     lambda _, children: State(*children))


def clean() -> State:
    return State(jnp.asarray(False), jnp.asarray(np.int32(0)), {})


def merge(first: State, then: State) -> State:
    """``first``, then ``then`` (found from a clean state): the first failure wins."""
    keep = first.err
    slots = dict(first.slots)
    for site, values in then.slots.items():
        old = first.slots.get(site)
        slots[site] = values if old is None else \
            [jnp.where(keep, a, b) for a, b in zip(old, values)]
    return State(jnp.logical_or(first.err, then.err), jnp.where(keep, first.code, then.code),
                 slots)


@dataclass
class _Body:
    """A control-flow body run through the checker: its graph returns the body's results,
    then its error state (flag, code, the values of each site in ``sites``)."""

    graph: Graph
    n_out: int
    sites: list[int]
    sizes: list[int]

    def replay(self, args: Sequence[Any]) -> tuple[list[Any], State]:
        return self.split(eval_graph(self.graph, list(args), bind_equation))

    def split(self, outs: Sequence[Any]) -> tuple[list[Any], State]:
        """The graph's results: the body's, and its error state."""
        body, (err, code), rest = outs[:self.n_out], outs[self.n_out:self.n_out + 2], \
            iter(outs[self.n_out + 2:])
        return body, State(err, code, {s: [next(rest) for _ in range(n)]
                                        for s, n in zip(self.sites, self.sizes)})

    def zeros(self) -> State:
        avals = iter(self.graph.out_avals[self.n_out + 2:])
        slots = {s: [jnp.zeros(a.shape, a.dtype) for a in itertools.islice(avals, n)]
                 for s, n in zip(self.sites, self.sizes)}
        return State(jnp.asarray(False), jnp.asarray(np.int32(0)), slots)


def holds_user_checks(graph: Graph) -> bool:
    return any(eqn.prim is check_p or any(holds_user_checks(g) for g in subgraphs(eqn.params))
               for eqn in graph.eqns)


class Checker:
    """Runs graphs with the checks ``enabled``; ``sites`` grows with every check found."""

    def __init__(self, enabled: frozenset) -> None:
        self.enabled = enabled
        self.user = FailedCheckError in enabled
        self.automatic = bool(enabled - {FailedCheckError})
        self.sites: list[CheckSite] = []

    def fail(self, state: State, site: CheckSite, failed: Any, values: Sequence[Any]) -> State:
        code = len(self.sites)
        self.sites.append(site)
        failed = jnp.asarray(failed, dtype=bool)
        first = jnp.logical_and(failed, jnp.logical_not(state.err))
        return State(jnp.logical_or(state.err, failed),
                     jnp.where(first, np.int32(code), state.code),
                     {**state.slots, code: [jnp.asarray(v) for v in values]})

    def run(self, graph: Graph, args: Sequence[Any]) -> tuple[list[Any], State]:
        env: dict[Any, Any] = dict(zip(graph.constvars, graph.constvals))
        env.update(zip(graph.inputs, args))
        state = clean()

        def read(atom: Any) -> Any:
            return atom.value if isinstance(atom, Literal) else env[atom]

        for eqn in graph.eqns:
            inputs = [read(a) for a in eqn.inputs]
            with source_override(eqn.source):
                outs, state = self._equation(eqn, inputs, state)
            env.update(zip(eqn.outputs, outs))
        return [read(atom) for atom in graph.outputs], state

    def _equation(self, eqn: Eqn, inputs: list[Any], state: State) -> tuple[list[Any], State]:
        if eqn.prim is check_p:
            if self.user or eqn.params["site"].automatic:  # (automatic: from check_error)
                state = self.fail(state, eqn.params["site"], jnp.logical_not(inputs[0]),
                                  inputs[1:])
            return [], state
        control = _CONTROL_FLOW.get(eqn.prim.name)
        if control is not None and (self.automatic or any(
                holds_user_checks(g) for g in subgraphs(eqn.params))):
            found = control(self, eqn, inputs)
            if found is not None:
                return found[0], merge(state, found[1])
        if any(holds_user_checks(g) for g in subgraphs(eqn.params)):
            raise EmberValueError(f"checkify.check inside {eqn.prim.name}: checkify checks "
                                  f"inside lax.cond, scan, while_loop, fori_loop, "
                                  f"checkpoint, custom_jvp and custom_vjp only; check "
                                  f"before calling it")
        outs = _bind(eqn, inputs)
        for found in automatic.checks_of(eqn, inputs, outs, self.enabled):
            site = CheckSite(found.msg, tree_flatten((tuple(found.payload), {}))[1], True,
                             found.source)
            state = self.fail(state, site, found.failed, found.payload)
        return outs, state

    def body(self, graph: Graph) -> _Body | None:
        """``graph`` run through the checker on its own (None: it holds no check)."""
        start, found = len(self.sites), {}

        def checked(*args: Any) -> list[Any]:
            outs, state = self.run(graph, args)
            found["sites"] = sorted(state.slots)
            values = [state.slots[s] for s in found["sites"]]
            found["sizes"] = [len(v) for v in values]
            return [*outs, state.err, state.code, *(v for vs in values for v in vs)]

        traced = trace_to_graph(checked, graph.in_avals)
        if len(self.sites) == start:
            return None
        return _Body(traced, len(graph.outputs), found["sites"], found["sizes"])


def _bind(eqn: Eqn, inputs: Sequence[Any]) -> list[Any]:
    outs = eqn.prim.bind(*inputs, **eqn.params)
    return list(outs) if eqn.prim.multiple_results else [outs]


def _cond(checker: Checker, eqn: Eqn, inputs: list[Any]) -> tuple[list[Any], State]:
    from ember.lax import switch

    branches = eqn.params["branches"]
    bodies = [checker.body(b) for b in branches]
    if all(b is None for b in bodies):
        return _bind(eqn, inputs), clean()
    zero = clean()
    for body in bodies:
        if body is not None:
            zero.slots.update(body.zeros().slots)

    def branch(graph: Graph, body: _Body | None) -> Callable:
        def run(*operands: Any) -> tuple[list[Any], State]:
            if body is None:
                outs, state = eval_graph(graph, list(operands), bind_equation), clean()
            else:
                outs, state = body.replay(operands)
            return outs, State(state.err, state.code,
                               {s: state.slots.get(s, v) for s, v in zero.slots.items()})
        return run

    outs, state = switch(inputs[0], [branch(g, b) for g, b in zip(branches, bodies)],
                         *inputs[1:])
    return outs, state


def _scan(checker: Checker, eqn: Eqn, inputs: list[Any]) -> tuple[list[Any], State]:
    from ember.lax import scan

    params = eqn.params
    body = checker.body(params["body"])
    if body is None:
        return _bind(eqn, inputs), clean()
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    consts, carry = inputs[:n_consts], inputs[n_consts:n_consts + n_carry]
    xs = inputs[n_consts + n_carry:]

    def step(carried: tuple[State, list[Any]], x: list[Any]) -> tuple[Any, list[Any]]:
        state, values = carried
        outs, found = body.replay([*consts, *values, *x])
        return (merge(state, found), outs[:n_carry]), outs[n_carry:]

    (state, carry_out), ys = scan(step, (body.zeros(), list(carry)), list(xs),
                                  length=params["length"], reverse=params["reverse"],
                                  unroll=params["unroll"])
    return [*carry_out, *ys], state


def _while(checker: Checker, eqn: Eqn, inputs: list[Any]) -> tuple[list[Any], State]:
    """The condition is checked where it runs: once before the loop, then after each
    step (so the loop carries the condition's value with the error state)."""
    from ember.lax import while_loop

    params = eqn.params
    test_body = checker.body(params["cond_graph"])
    step_body = checker.body(params["body_graph"])
    if test_body is None and step_body is None:
        return _bind(eqn, inputs), clean()
    n_cond, n_body = params["cond_nconsts"], params["body_nconsts"]
    cond_consts, body_consts = inputs[:n_cond], inputs[n_cond:n_cond + n_body]
    carry = inputs[n_cond + n_body:]

    def run(graph: Graph, body: _Body | None, args: list[Any]) -> tuple[list[Any], State]:
        if body is None:
            return eval_graph(graph, args, bind_equation), clean()
        return body.replay(args)

    def test(values: list[Any]) -> tuple[Any, State]:
        outs, state = run(params["cond_graph"], test_body, [*cond_consts, *values])
        return outs[0], state

    def body_fun(carried: tuple[State, list[Any], Any]) -> tuple[State, list[Any], Any]:
        state, values, _ = carried
        values, found = run(params["body_graph"], step_body, [*body_consts, *values])
        go, tested = test(values)
        return merge(merge(state, found), tested), values, go

    zero = clean()
    for body in (test_body, step_body):
        if body is not None:
            zero.slots.update(body.zeros().slots)
    go, tested = test(list(carry))
    state, carry_out, _ = while_loop(lambda carried: carried[2], body_fun,
                                     (merge(zero, tested), list(carry), go))
    return list(carry_out), state


def _checkpoint(checker: Checker, eqn: Eqn, inputs: list[Any]) -> tuple[list[Any], State]:
    """A ``checkpoint`` body is run in line: the same values (what it would recompute
    for the backward pass, a checkified program keeps)."""
    return checker.run(eqn.params["call"], inputs)


def _custom_call(checker: Checker, eqn: Eqn, inputs: list[Any],
                 ) -> tuple[list[Any], State] | None:
    """The checked body as the call, its error state as extra results; the rules see
    the closure constants twice: as constants (so differentiating them stays an error)
    and again as arguments, the primal values the body's checks are recomputed from."""
    params = eqn.params
    body = checker.body(params["call"])
    if body is None:
        return None
    n_consts, n_out = params["num_consts"], body.n_out

    def checked_call(*xs: Any) -> list[Any]:
        return eval_graph(body.graph, list(xs[n_consts:]), bind_equation)

    avals = params["call"].in_avals
    call, hoisted = hoist_consts(trace_to_graph(checked_call, [*avals[:n_consts], *avals]))

    def errors_of(primals: Sequence[Any]) -> list[Any]:
        return eval_graph(body.graph, list(primals), bind_equation)[n_out:]

    if eqn.prim.name == "custom_jvp_call":
        rule = params["jvp"]

        def jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
            with checks_ignored():
                outs, t_outs = rule(primals[n_consts:], tangents[n_consts:])
            errors = errors_of(primals)
            return [*outs, *errors], [*t_outs, *(jnp.zeros_like(e) for e in errors)]

        rules = {"jvp": jvp}
    else:
        fwd_rule, bwd_rule = params["fwd"], params["bwd"]

        def fwd(*primals: Any) -> tuple[list, list]:
            with checks_ignored():
                outs, res = fwd_rule(*primals[n_consts:])
            return [*outs, *errors_of(primals)], res

        def bwd(res: Sequence[Any], cts: Sequence[Any]) -> list[Any]:
            return [None] * n_consts + list(bwd_rule(res, cts[:n_out]))

        rules = {"fwd": fwd, "bwd": bwd}
    consts = inputs[:n_consts]
    outs = eqn.prim.bind(*hoisted, *consts, *inputs, call=call,
                         num_consts=len(hoisted) + n_consts, name=params["name"], **rules)
    return body.split(outs)


_CONTROL_FLOW = {"cond": _cond, "scan": _scan, "while": _while, "checkpoint": _checkpoint,
                 "custom_jvp_call": _custom_call, "custom_vjp_call": _custom_call}
