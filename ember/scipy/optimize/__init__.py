"""``ember.scipy.optimize``: unconstrained minimization (as ``jax.scipy.optimize``)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ember import numpy as jnp
from ember.errors import EmberTypeError, EmberValueError
from ember.scipy.optimize._bfgs import minimize_bfgs

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """``x``: the solution; ``success``: converged without a line search failure;
    ``status``: 0 converged, 1 out of iterations, 3 or 4 a failed line search; ``fun``,
    ``jac``: value and gradient at ``x``; ``hess_inv``: the inverse Hessian estimate;
    ``nfev``, ``njev``, ``nit``: evaluations of ``fun`` and its gradient, iterations."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def minimize(fun: Callable[..., Any], x0: Any, args: tuple = (), *, method: str,
             tol: float | None = None, options: Mapping[str, Any] | None = None
             ) -> OptimizeResults:
    """Minimize ``fun(x, *args)`` over the vector ``x`` from ``x0``, with ``method='BFGS'``
    (the only method, as JAX). Traceable: it works under ``jit`` and ``vmap``.

    ``options``: ``maxiter``, ``norm`` and ``gtol`` (the stopping rule ``||grad||_norm <
    gtol``, default inf-norm below 1e-5), ``line_search_maxiter``. ``tol`` is accepted and
    unused, as in JAX: set ``options={'gtol': ...}``.
    """
    if not isinstance(args, tuple):
        raise EmberTypeError(f"minimize: args must be a tuple, got {type(args).__name__} "
                             "(write args=(value,) for one extra argument)")
    if method.lower() != "bfgs":
        raise EmberValueError(f"minimize: method {method!r} is not recognized; the only "
                              "method is 'BFGS'")
    results = minimize_bfgs(lambda x: fun(x, *args), x0, **(options or {}))
    return OptimizeResults(
        x=results.x_k, success=results.converged & jnp.logical_not(results.failed),
        status=results.status, fun=results.f_k, jac=results.g_k, hess_inv=results.H_k,
        nfev=results.nfev, njev=results.ngev, nit=results.k)


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
