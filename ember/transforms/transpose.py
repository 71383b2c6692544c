"""Transposition: run a linear Graph backwards, from output cotangents to input ones.

``backward_pass`` first evaluates the equations that do not depend on the linear inputs
(recomputation staged by ``checkpoint``, say), then walks the linear equations in
reverse, calling each primitive's ``transpose`` rule and summing the cotangents of
values used more than once. Operations it binds are attributed to the source line of
the forward equation they transpose, so a backward graph reads like its forward one.
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.core.abstract import aval_of
from ember.core.source_info import source_override
from ember.errors import EmberTypeError, EmberValueError
from ember.ir.graph import Eqn, Graph, Literal, Var
from ember.ops.rules import UndefinedPrimal, Zero, add_tangents, instantiate

__all__ = ["backward_pass"]


def backward_pass(graph: Graph, consts: Sequence[Any], args: Sequence[Any],
                  cts_out: Sequence[Any]) -> list[Any]:
    """Cotangents of ``graph``'s inputs given those of its outputs.

    ``args[i]`` is ``UndefinedPrimal`` for a linear input, else its value; ``consts`` are
    the values of ``graph.constvars``. ``cts_out`` entries may be ``Zero`` or None.
    Returns one entry per input: a cotangent (possibly ``Zero``) for linear inputs,
    None for the others.
    """
    env: dict[Var, Any] = dict(zip(graph.constvars, consts))
    linear: set[Var] = set()
    for var, arg in zip(graph.inputs, args):
        if isinstance(arg, UndefinedPrimal):
            linear.add(var)
        else:
            env[var] = arg
    linear_eqns = _evaluate_nonlinear(graph, env, linear)
    cts: dict[Var, Any] = {}
    for atom, ct in zip(graph.outputs, cts_out):
        if isinstance(atom, Var) and atom in linear and ct is not None:
            cts[atom] = add_tangents(cts.get(atom), ct)
    for eqn in reversed(linear_eqns):
        _transpose_eqn(eqn, env, linear, cts)
    return [cts.get(var, Zero(var.aval)) if var in linear else None for var in graph.inputs]


def _evaluate_nonlinear(graph: Graph, env: dict, linear: set[Var]) -> list[Eqn]:
    """Evaluate the equations the linear ones need that read no linear value; mark the
    outputs of the others linear and return them in order."""
    linear_eqns, nonlinear = [], []
    for eqn in graph.eqns:
        if any(isinstance(a, Var) and a in linear for a in eqn.inputs):
            linear.update(eqn.outputs)
            linear_eqns.append(eqn)
        else:
            nonlinear.append(eqn)
    needed = {a for e in linear_eqns for a in e.inputs if isinstance(a, Var)}
    kept = []
    for eqn in reversed(nonlinear):  # dead-code elimination, backwards
        if any(v in needed for v in eqn.outputs):
            needed.update(a for a in eqn.inputs if isinstance(a, Var))
            kept.append(eqn)
    for eqn in reversed(kept):
        with source_override(eqn.source):
            outs = eqn.prim.bind(*[_read(env, a) for a in eqn.inputs], **eqn.params)
        env.update(zip(eqn.outputs, outs if eqn.prim.multiple_results else [outs]))
    return linear_eqns


def _read(env: dict, atom: Any) -> Any:
    return atom.value if isinstance(atom, Literal) else env[atom]


def _transpose_eqn(eqn: Eqn, env: dict, linear: set[Var], cts: dict) -> None:
    cts_out = [cts.pop(var, None) for var in eqn.outputs]
    if all(ct is None or isinstance(ct, Zero) for ct in cts_out):
        return
    rule = eqn.prim.transpose_rule
    if rule is None:
        raise EmberTypeError(
            f"cannot transpose primitive '{eqn.prim.name}' (reverse-mode differentiation "
            f"needs it): {eqn.prim.waived.get('transpose', 'it has no transpose rule')}")
    cts_out = [instantiate(ct if ct is not None else Zero(var.aval))
               for ct, var in zip(cts_out, eqn.outputs)]
    invals = [UndefinedPrimal(a.aval) if isinstance(a, Var) and a in linear else _read(env, a)
              for a in eqn.inputs]
    with source_override(eqn.source):
        cts_in = rule(cts_out if eqn.prim.multiple_results else cts_out[0], *invals,
                      **eqn.params)
        if len(cts_in) != len(eqn.inputs):
            raise EmberValueError(f"transpose rule of '{eqn.prim.name}' returned "
                                  f"{len(cts_in)} cotangents for {len(eqn.inputs)} inputs")
        for atom, value, ct in zip(eqn.inputs, invals, cts_in):
            if isinstance(value, UndefinedPrimal) and ct is not None \
                    and not isinstance(ct, Zero):
                _check_cotangent(eqn, value, ct)
                cts[atom] = add_tangents(cts.get(atom), ct)


def _check_cotangent(eqn: Eqn, primal: UndefinedPrimal, ct: Any) -> None:
    shape = aval_of(ct).shape
    if shape != primal.shape:
        raise EmberValueError(
            f"transpose rule of '{eqn.prim.name}' returned a cotangent of shape {shape} for "
            f"an input of shape {primal.shape} (a bug in the rule)")
