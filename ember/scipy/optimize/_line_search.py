"""A line search for the strong Wolfe conditions (Nocedal and Wright, Algorithms 3.5
and 3.6), as one ``while_loop`` with one function evaluation per iteration.

The loop is a small state machine: first it *brackets*, trying growing steps until one
satisfies both conditions (done) or a bracket known to hold such a step is found; then
it *zooms*, trying the minimizer of a safeguarded quadratic model inside the bracket and
shrinking the bracket, until a step satisfies both conditions or the evaluations run out.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ember import lax
from ember import numpy as jnp
from ember.transforms.api import value_and_grad


class LineSearchResults(NamedTuple):
    """``failed``: no step met the conditions within ``maxiter`` evaluations, or ``p`` is
    not a descent direction; then ``a_k`` is 0 and ``f_k`` / ``g_k`` are the start's.
    ``status``: 0 success, 1 out of evaluations, 2 not a descent direction."""
    failed: Any
    nfev: Any
    ngev: Any
    k: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


class _State(NamedTuple):
    i: Any
    done: Any
    zooming: Any
    a: Any  # the next step to try (while bracketing)
    a_prev: Any  # the last step tried while bracketing, and its phi and phi'
    phi_prev: Any
    dphi_prev: Any
    a_lo: Any  # the bracket while zooming: lo is the best step so far
    phi_lo: Any
    dphi_lo: Any
    a_hi: Any
    phi_hi: Any
    a_star: Any  # the accepted step and its value and gradient
    phi_star: Any
    g_star: Any


def _zoom_trial(s: _State) -> Any:
    """The minimizer of the quadratic through ``phi(lo)``, ``phi'(lo)`` and ``phi(hi)``;
    the midpoint where that falls outside the inner 80% of the bracket."""
    d = s.a_hi - s.a_lo
    curvature = 2 * (s.phi_hi - s.phi_lo - s.dphi_lo * d)
    safe = jnp.where(curvature > 0, curvature, 1)
    trial = s.a_lo - s.dphi_lo * d * d / safe
    lo, hi = jnp.minimum(s.a_lo, s.a_hi), jnp.maximum(s.a_lo, s.a_hi)
    inside = (curvature > 0) & (trial > lo + 0.1 * (hi - lo)) & (trial < hi - 0.1 * (hi - lo))
    return jnp.where(inside, trial, 0.5 * (s.a_lo + s.a_hi))


def line_search(f: Callable[[Any], Any], xk: Any, pk: Any, old_fval: Any = None,
                old_old_fval: Any = None, gfk: Any = None, c1: float = 1e-4,
                c2: float = 0.9, maxiter: int = 20) -> LineSearchResults:
    """A step ``a`` along ``pk`` from ``xk`` with ``f(xk + a pk) <= f(xk) + c1 a phi'(0)``
    and ``|phi'(a)| <= c2 |phi'(0)|``. The first trial is 1, or shorter where the last
    decrease (``old_old_fval - old_fval``) predicts a shorter step, as SciPy."""
    value_grad = value_and_grad(f)
    if old_fval is None or gfk is None:
        old_fval, gfk = value_grad(xk)
    phi0 = old_fval
    dphi0 = jnp.real(jnp.vdot(gfk, pk))
    descent = dphi0 < 0

    if old_old_fval is None:
        a1 = jnp.ones_like(phi0)
    else:
        predicted = 1.01 * 2 * (phi0 - old_old_fval) / jnp.where(descent, dphi0, -1)
        a1 = jnp.where((predicted > 0) & jnp.isfinite(predicted),
                       jnp.minimum(1.0, predicted), 1.0).astype(phi0.dtype)

    zero = jnp.zeros_like(phi0)
    init = _State(i=jnp.asarray(0), done=jnp.asarray(False), zooming=jnp.asarray(False),
                  a=a1, a_prev=zero, phi_prev=phi0, dphi_prev=dphi0, a_lo=zero, phi_lo=phi0,
                  dphi_lo=dphi0, a_hi=zero, phi_hi=phi0, a_star=zero, phi_star=phi0,
                  g_star=gfk)

    def keep_going(s: _State) -> Any:
        return descent & ~s.done & (s.i < maxiter)

    def step(s: _State) -> _State:
        a = jnp.where(s.zooming, _zoom_trial(s), s.a)
        phi, g = value_grad(xk + a * pk)
        dphi = jnp.real(jnp.vdot(g, pk))
        too_high = (phi > phi0 + c1 * a * dphi0) | ~jnp.isfinite(phi)
        flat_enough = jnp.abs(dphi) <= -c2 * dphi0

        # Bracketing: a too-high step (or no lower than the last) bounds the bracket
        # from above; a rising slope bounds it from the other side.
        over = too_high | ((s.i > 0) & (phi >= s.phi_prev))
        rising = ~over & ~flat_enough & (dphi >= 0)
        # Zooming: a too-high step (or no lower than lo) replaces hi, else it becomes lo.
        replaces_hi = too_high | (phi >= s.phi_lo)

        done = jnp.where(s.zooming, ~replaces_hi & flat_enough, ~over & flat_enough)
        start_zoom = ~s.zooming & (over | rising)
        new_lo = jnp.where(s.zooming, ~replaces_hi, rising)
        # While bracketing, 'over' makes the previous step lo and this one hi; 'rising'
        # makes this step lo and the previous one hi.
        lo_a = jnp.where(s.zooming, s.a_lo, s.a_prev)
        lo_phi = jnp.where(s.zooming, s.phi_lo, s.phi_prev)
        lo_dphi = jnp.where(s.zooming, s.dphi_lo, s.dphi_prev)
        hi_a = jnp.where(s.zooming, s.a_hi, s.a_prev)
        hi_phi = jnp.where(s.zooming, s.phi_hi, s.phi_prev)
        # A new lo whose slope points away from hi: the old lo becomes hi.
        flip_hi = s.zooming & new_lo & (dphi * (s.a_hi - s.a_lo) >= 0)
        hi_a = jnp.where(flip_hi, s.a_lo, jnp.where(new_lo, hi_a, a))
        hi_phi = jnp.where(flip_hi, s.phi_lo, jnp.where(new_lo, hi_phi, phi))
        return _State(
            i=s.i + 1, done=done, zooming=s.zooming | start_zoom,
            a=2 * a, a_prev=a, phi_prev=phi, dphi_prev=dphi,
            a_lo=jnp.where(new_lo, a, lo_a), phi_lo=jnp.where(new_lo, phi, lo_phi),
            dphi_lo=jnp.where(new_lo, dphi, lo_dphi), a_hi=hi_a, phi_hi=hi_phi,
            a_star=jnp.where(done, a, s.a_star), phi_star=jnp.where(done, phi, s.phi_star),
            g_star=jnp.where(done, g, s.g_star))

    s = lax.while_loop(keep_going, step, init)
    failed = ~s.done
    status = jnp.where(~descent, 2, jnp.where(failed, 1, 0))
    return LineSearchResults(failed=failed, nfev=s.i, ngev=s.i, k=s.i, a_k=s.a_star,
                             f_k=s.phi_star, g_k=s.g_star, status=status)
