"""Solvers differentiated implicitly, as ``jax.lax``: ``custom_root`` (a root of ``f``
found by any ``solve``, differentiated through the implicit function theorem) and
``custom_linear_solve`` (``x`` with ``matvec(x) == b``, differentiated as ``A^-1``,
its transpose ``transpose_solve``).

The solver itself is never differentiated: derivatives come from ``f`` or ``matvec``
at the solution, with respect to the values they close over (made explicit arguments
by ``closure_convert``) and to ``b``. Reverse mode transposes the tangent solve
through ``transpose_solve`` (``custom_linear_solve``)
or by linearizing ``tangent_solve`` (``custom_root``, whose ``tangent_solve`` must be
written with transposable operations, e.g. a division or ``linalg.solve``).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember.core.pytree import tree_flatten, tree_map, tree_unflatten
from ember.errors import EmberTypeError
from ember.transforms.api import jvp, stop_gradient
from ember.transforms.closure_convert import closure_convert
from ember.transforms.custom import custom_jvp, linear_map, linearizing
from ember.transforms.linear_transpose import linear_transpose

__all__ = ["custom_root", "custom_linear_solve"]


def _no_aux(name: str, has_aux: bool) -> None:
    if has_aux:
        raise NotImplementedError(f"{name}(has_aux=True) is not supported yet; return the "
                                  f"auxiliary values from a separate call")


def _sub(a: Any, b: Any) -> Any:
    return tree_map(lambda x, y: x - y, a, b)


def _explicit(fun: Callable, *example_args: Any) -> tuple[Callable, list[Any]]:
    """``fun`` closure-converted, with its constants' derivatives stopped: a solver's own
    captured values (a factored matrix, a tolerance) are not differentiated, as in JAX."""
    converted, consts = closure_convert(fun, *example_args)
    return converted, [stop_gradient(c) for c in consts]


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:
    """``solve(f, initial_guess)``, a root of ``f``, whose derivative with respect to the
    values ``f`` closes over is ``-(df/dx)^-1 df/dtheta`` at the root:
    ``tangent_solve(g, y)`` solves the linear ``g(x) = y`` (``g`` is ``f``'s JVP in ``x``
    at the root; for a scalar, ``lambda g, y: y / g(1.0)``)."""
    _no_aux("custom_root", has_aux)
    f_explicit, theta = closure_convert(f, initial_guess)
    n = len(theta)
    solve_explicit, solver_consts = _explicit(
        lambda guess, *t: solve(lambda x: f_explicit(x, *t), guess), initial_guess, *theta)

    @custom_jvp
    def root(guess: Any, *args: Any) -> Any:
        return stop_gradient(solve_explicit(guess, *args))

    @root.defjvp
    def _root_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        guess, *args = primals
        solution, params = root(guess, *args), tuple(args[:n])
        _, moved = jvp(lambda *t: f_explicit(solution, *t), params, tuple(tangents[1:n + 1]))

        def in_x(v: Any) -> Any:
            return jvp(lambda x: f_explicit(x, *params), (solution,), (v,))[1]

        return solution, tangent_solve(in_x, tree_map(lambda m: -m, moved))

    return root(initial_guess, *theta, *solver_consts)


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False) -> Any:
    """``solve(matvec, b)``: ``x`` with ``matvec(x) == b``, differentiated as the linear
    map it is: tangent ``A^-1 (db - dA x)`` (``dA``: ``matvec``'s derivative in the
    values it closes over). Reverse mode needs ``transpose_solve(vecmat, ct)`` (``solve``
    when ``symmetric``)."""
    _no_aux("custom_linear_solve", has_aux)
    matvec_explicit, theta = closure_convert(matvec, b)
    n = len(theta)
    solve_explicit, solve_consts = _explicit(
        lambda rhs, *t: solve(lambda v: matvec_explicit(v, *t), rhs), b, *theta)
    n_solve = len(solve_consts)
    back = solve if symmetric else transpose_solve

    def run_back(ct: Any, *t: Any) -> Any:
        if symmetric:
            return back(lambda v: matvec_explicit(v, *t), ct)
        transposed = linear_transpose(lambda v: matvec_explicit(v, *t), b)
        return back(lambda v: transposed(v)[0], ct)

    back_explicit, back_consts = _explicit(run_back, b, *theta) if back is not None else \
        (None, [])

    def split(args: tuple) -> tuple[tuple, tuple, tuple]:
        return args[:n], args[n:n + n_solve], args[n + n_solve:]

    def linear(rhs: Any, args: tuple) -> Any:
        params, solver, _ = split(args)
        return solve_explicit(rhs, *params, *solver)

    def transposed(args: Sequence[Any], cts: Sequence[Any]) -> list[Any]:
        if back_explicit is None:
            raise EmberTypeError("custom_linear_solve: reverse-mode differentiation needs "
                                 "transpose_solve= (or symmetric=True when matvec is "
                                 "symmetric)")
        params, _, backward = split(tuple(args))
        ct = back_explicit(tree_unflatten(out_tree, list(cts)), *params, *backward)
        return tree_flatten(ct)[0]

    @custom_jvp
    def solved(rhs: Any, *args: Any) -> Any:
        return linear(rhs, args)

    @solved.defjvp
    def _solved_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        rhs, *args = primals
        x, params = solved(rhs, *args), tuple(args[:n])
        _, moved = jvp(lambda *t: matvec_explicit(x, *t), params, tuple(tangents[1:n + 1]))
        rhs_dot = _sub(tangents[0], moved)
        if not linearizing(tree_flatten(rhs_dot)[0]):
            return x, linear(rhs_dot, tuple(args))
        return x, linear_map(tuple(args), rhs_dot, transposed, x, "custom_linear_solve")

    out_tree = tree_flatten(b)[1]
    return solved(b, *theta, *solve_consts, *back_consts)
