"""BFGS (Nocedal and Wright, Algorithm 6.1) as one ``while_loop``: a quasi-Newton step
``-H g`` along which a strong-Wolfe line search picks the step length, then the rank-two
update of the inverse Hessian estimate ``H``."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from ember import lax
from ember import numpy as jnp
from ember.errors import EmberValueError
from ember.scipy.optimize._line_search import line_search
from ember.transforms.api import value_and_grad


class BFGSResults(NamedTuple):
    """The loop's state, and its result: ``status`` is 0 (converged), 1 (``maxiter``
    reached), 3 (the line search ran out of evaluations) or 4 (it was given a direction
    that does not descend), as ``2 + line search status``."""
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    nhev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    old_old_fval: Any
    status: Any
    line_search_status: Any


def minimize_bfgs(fun: Callable[[Any], Any], x0: Any, maxiter: int | None = None,
                  norm: float = math.inf, gtol: float = 1e-5,
                  line_search_maxiter: int = 10) -> BFGSResults:
    """Minimize ``fun`` from ``x0`` (a vector) until the ``norm``-norm of the gradient is
    below ``gtol``, or ``maxiter`` iterations (200 per variable by default)."""
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise EmberValueError(f"minimize: x0 must be a vector (flatten it, and reshape inside "
                              f"fun), got shape {tuple(x0.shape)}")
    d = x0.shape[0]
    if maxiter is None:
        maxiter = 200 * d
    value_grad = value_and_grad(fun)
    f_0, g_0 = value_grad(x0)
    eye = jnp.eye(d, dtype=g_0.dtype)
    state = BFGSResults(
        converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=jnp.asarray(False),
        k=jnp.asarray(0), nfev=jnp.asarray(1), ngev=jnp.asarray(1), nhev=jnp.asarray(0),
        x_k=x0, f_k=f_0, g_k=g_0, H_k=eye,
        # A guess at the previous value that makes the first trial step ||g|| long.
        old_old_fval=f_0 + jnp.linalg.norm(g_0) / 2,
        status=jnp.asarray(0), line_search_status=jnp.asarray(0))

    def keep_going(s: BFGSResults) -> Any:
        return ~s.converged & ~s.failed & (s.k < maxiter)

    def step(s: BFGSResults) -> BFGSResults:
        p_k = -(s.H_k @ s.g_k)
        search = line_search(fun, s.x_k, p_k, old_fval=s.f_k, old_old_fval=s.old_old_fval,
                             gfk=s.g_k, maxiter=line_search_maxiter)
        s_k = search.a_k * p_k
        y_k = search.g_k - s.g_k
        rho_k = 1 / jnp.real(jnp.vdot(y_k, s_k))
        # H+ = (I - rho s y^T) H (I - rho y s^T) + rho s s^T; skipped when y^T s = 0.
        w = eye - rho_k * jnp.outer(s_k, y_k)
        h_next = w @ s.H_k @ w.T + rho_k * jnp.outer(s_k, s_k)
        h_next = jnp.where(jnp.isfinite(rho_k), h_next, s.H_k)
        return s._replace(
            converged=jnp.linalg.norm(search.g_k, ord=norm) < gtol, failed=search.failed,
            k=s.k + 1, nfev=s.nfev + search.nfev, ngev=s.ngev + search.ngev,
            x_k=s.x_k + s_k, f_k=search.f_k, g_k=search.g_k, H_k=h_next,
            old_old_fval=s.f_k, line_search_status=search.status)

    state = lax.while_loop(keep_going, step, state)
    status = jnp.where(state.converged, 0, jnp.where(
        state.failed, 2 + state.line_search_status, jnp.where(state.k >= maxiter, 1, -1)))
    return state._replace(status=status)
