"""The Graph verifier: checks the invariants every pass must keep.

- SSA: each variable is defined once (an input, a constant or one equation output) and
  used only after its definition; the graph's outputs are defined.
- Types: each equation's output types are what its primitive's abstract eval gives for
  its input types and params; literals are scalars of their stated dtype.
- Nested graphs (control-flow bodies) are closed (no constants, no outer variables) and
  verified recursively.

Errors name the equation as the printer writes it and the user's source line.
"""
from __future__ import annotations

from typing import Any

from ember.core.abstract import ShapedArray
from ember.errors import EmberError, EmberValueError, with_location
from ember.ir.graph import Eqn, Graph, Literal, Var, subgraphs
from ember.ir.printer import eqn_text


class VerificationError(EmberValueError):
    """A Graph broke an IR invariant (an Ember bug when it comes out of a pass)."""


def verify(graph: Graph) -> None:
    """Raise ``VerificationError`` if ``graph`` breaks an invariant; else return None."""
    if len(graph.constvals) not in (0, len(graph.constvars)):
        raise VerificationError(f"graph has {len(graph.constvars)} constants but "
                                f"{len(graph.constvals)} constant values")
    defined: set[Var] = set()
    for var in [*graph.constvars, *graph.inputs]:
        if var in defined:
            raise VerificationError(f"graph input {var} appears twice among the inputs")
        defined.add(var)
    for eqn in graph.eqns:
        _verify_eqn(graph, eqn, defined)
    for index, atom in enumerate(graph.outputs):
        if isinstance(atom, Var) and atom not in defined:
            raise VerificationError(f"graph output {index} ({atom}) is never defined")


def _verify_eqn(graph: Graph, eqn: Eqn, defined: set[Var]) -> None:
    def fail(message: str) -> VerificationError:
        return VerificationError(with_location(
            f"{message}\n  in equation: {eqn_text(eqn, graph)}", eqn.source))

    for position, atom in enumerate(eqn.inputs):
        if isinstance(atom, Literal):
            _check_literal(atom, position, fail)
        elif atom not in defined:
            raise fail(f"input {position} ({atom}) is used before it is defined")
    for var in eqn.outputs:
        if var in defined:
            raise fail(f"output {var} is defined a second time")
        defined.add(var)
    for sub in subgraphs(eqn.params):
        if sub.constvars:
            raise fail("a nested graph has constants; nested graphs must take captured "
                       "values as explicit inputs (see staging.hoist_consts)")
        try:
            verify(sub)
        except VerificationError as error:
            raise fail(f"nested graph: {error}") from None
    _check_types(eqn, fail)


def _check_literal(lit: Literal, position: int, fail) -> None:
    if lit.aval.shape != () or lit.value.shape != () or lit.value.dtype != lit.aval.dtype:
        raise fail(f"literal input {position} must be a scalar of its stated type "
                   f"{lit.aval.str_short()}, holds {lit.value.dtype}{list(lit.value.shape)}")


def _check_types(eqn: Eqn, fail) -> None:
    try:
        expected = eqn.prim.abstract_eval(*(a.aval for a in eqn.inputs), **eqn.params)
    except (EmberError, TypeError, ValueError, KeyError, IndexError) as error:
        raise fail(f"{eqn.prim.name} rejects its input types: {error}") from None
    expected = list(expected) if eqn.prim.multiple_results else [expected]
    actual = [v.aval for v in eqn.outputs]
    if len(expected) != len(actual):
        raise fail(f"{eqn.prim.name} produces {len(expected)} outputs, the equation "
                   f"binds {len(actual)}")
    for index, (want, have) in enumerate(zip(expected, actual)):
        if _type_of(want) != _type_of(have):
            raise fail(f"output {index} is typed {have.str_short()} but {eqn.prim.name} "
                       f"gives {want.str_short()} for these inputs")


def _type_of(aval: Any) -> tuple:
    if not isinstance(aval, ShapedArray):
        raise VerificationError(f"abstract eval returned {aval!r}, not a ShapedArray")
    return aval.shape, aval.dtype
