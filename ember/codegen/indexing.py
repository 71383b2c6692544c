"""Index expressions of the kernel IR: integer affine forms over loop variables.

A fused kernel reads every operand through an index expression in the kernel's loop
variables: transposes, broadcasts, slices, reversals and reshapes of the values it
reads are folded into these expressions instead of being materialized. An expression
is an ``Affine`` form ``const + sum(coef * atom)`` whose atoms are loop variables
(``Sym``) or a floor division / modulo of another affine form by a positive constant
(reshapes need those). All index values are non-negative, so C's truncating ``/`` and
``%`` agree with floor division.

Forms are kept canonical so that equal indices compare equal (the lowering relies on it
to compute a value once per position) and the common patterns cancel: unravelling a
flat index and linearizing it again gives the flat index back, and splitting merged
dimensions gives the original loop variables.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sym:
    """A loop variable running over ``range(extent)``."""

    name: str
    extent: int

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class FloorDiv:
    arg: Affine
    divisor: int

    def __repr__(self) -> str:
        return f"({self.arg!r} / {self.divisor})"


@dataclass(frozen=True)
class Mod:
    arg: Affine
    divisor: int

    def __repr__(self) -> str:
        return f"({self.arg!r} % {self.divisor})"


Atom = Sym | FloorDiv | Mod


@dataclass(frozen=True)
class Affine:
    """``const + sum(coef * atom for atom, coef in terms)``; build with the functions below."""

    terms: tuple[tuple[Atom, int], ...] = ()
    const: int = 0
    _hash: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.terms, self.const)))

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        parts = [repr(atom) if coef == 1 else f"{coef}*{atom!r}" for atom, coef in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


Index = tuple[Affine, ...]

ZERO = Affine()


def const(value: int) -> Affine:
    return Affine((), int(value))


def var(atom: Atom) -> Affine:
    """The form of one loop variable (or of one division or modulo)."""
    return Affine(((atom, 1),), 0)


@functools.lru_cache(maxsize=1 << 16)
def _atom_key(atom: Atom) -> tuple:
    """A total order of atoms (so that equal forms have equal term tuples)."""
    if isinstance(atom, Sym):
        return (0, atom.name, atom.extent)
    arg = tuple((_atom_key(a), c) for a, c in atom.arg.terms) + (atom.arg.const,)
    return (1 if isinstance(atom, FloorDiv) else 2, arg, atom.divisor)


def _build(coefs: dict[Atom, int], constant: int) -> Affine:
    """A canonical form: no zero terms, div/mod pairs recombined, terms sorted."""
    coefs = {atom: coef for atom, coef in coefs.items() if coef}
    while True:
        recombined = _recombine_once(coefs)
        if recombined is None:
            break
        constant += recombined
    terms = tuple(sorted(coefs.items(), key=lambda item: _atom_key(item[0])))
    return Affine(terms, constant)


def _recombine_once(coefs: dict[Atom, int]) -> int | None:
    """Replace ``k*(x % c) + k*c*(x / c)`` by ``k*x`` (undoing unravel + linearize).

    Edits ``coefs`` in place and returns the constant to add, or None if nothing matched.
    """
    for atom, coef in list(coefs.items()):
        if not isinstance(atom, Mod):
            continue
        partner = _single_atom(floordiv(atom.arg, atom.divisor))
        if partner is None or coefs.get(partner) != coef * atom.divisor:
            continue
        del coefs[atom]
        del coefs[partner]
        for inner, inner_coef in atom.arg.terms:
            total = coefs.get(inner, 0) + coef * inner_coef
            if total:
                coefs[inner] = total
            else:
                coefs.pop(inner, None)
        return coef * atom.arg.const
    return None


def add(*forms: Affine) -> Affine:
    coefs: dict[Atom, int] = {}
    constant = 0
    for form in forms:
        constant += form.const
        for atom, coef in form.terms:
            coefs[atom] = coefs.get(atom, 0) + coef
    return _build(coefs, constant)


def scale(form: Affine, factor: int) -> Affine:
    if factor == 0:
        return ZERO
    if factor == 1:
        return form
    return Affine(tuple((atom, coef * factor) for atom, coef in form.terms), form.const * factor)


def _atom_bounds(atom: Atom) -> tuple[int, int]:
    if isinstance(atom, Sym):
        return 0, max(atom.extent - 1, 0)
    lo, hi = bounds(atom.arg)
    if isinstance(atom, FloorDiv):
        return lo // atom.divisor, hi // atom.divisor
    if 0 <= lo and hi < atom.divisor:
        return lo, hi
    return 0, atom.divisor - 1


def bounds(form: Affine) -> tuple[int, int]:
    """Smallest and largest value ``form`` takes over its loop variables' ranges."""
    lo = hi = form.const
    for atom, coef in form.terms:
        a_lo, a_hi = _atom_bounds(atom)
        if coef > 0:
            lo, hi = lo + coef * a_lo, hi + coef * a_hi
        else:
            lo, hi = lo + coef * a_hi, hi + coef * a_lo
    return lo, hi


def _split(form: Affine, divisor: int) -> tuple[Affine, Affine]:
    """``form = divisor * quotient + rest`` where rest keeps the terms whose coefficients
    are not multiples of divisor, and as much of the constant as makes it non-negative
    (so C's truncating ``/`` and ``%`` on it agree with floor division)."""
    q_terms = tuple((a, c // divisor) for a, c in form.terms if c % divisor == 0)
    r_terms = tuple((a, c) for a, c in form.terms if c % divisor != 0)
    lowest = bounds(Affine(r_terms, 0))[0]
    q_const = (form.const + lowest) // divisor
    return Affine(q_terms, q_const), Affine(r_terms, form.const - divisor * q_const)


def _common_factor(form: Affine, divisor: int) -> int:
    factor = divisor
    for _, coef in form.terms:
        factor = math.gcd(factor, coef)
    return math.gcd(factor, form.const)


def _divide_exact(form: Affine, factor: int) -> Affine:
    return Affine(tuple((a, c // factor) for a, c in form.terms), form.const // factor)


def _peel(form: Affine, divisor: int) -> tuple[int, Affine, Affine] | None:
    """``(g, y, r)`` with ``form = g*y + r``, ``1 < g < divisor``, ``g`` dividing
    ``divisor`` and ``0 <= r < g`` (a loop split into blocks, say ``256*o + i`` with
    ``i < 256``), so that dividing ``form`` by ``divisor`` only divides ``y``; None when
    no such split exists (or ``form`` may be negative)."""
    if bounds(form)[0] < 0:
        return None
    for step in sorted({math.gcd(c, divisor) for _, c in form.terms}, reverse=True):
        if not 1 < step < divisor:
            continue
        fine = Affine(tuple((a, c) for a, c in form.terms if c % step), form.const)
        lo, hi = bounds(fine)
        if 0 <= lo and hi < step:
            coarse = Affine(tuple((a, c // step) for a, c in form.terms if not c % step), 0)
            return step, coarse, fine
    return None


def _single_atom(form: Affine) -> Atom | None:
    if len(form.terms) == 1 and form.terms[0][1] == 1 and form.const == 0:
        return form.terms[0][0]
    return None


def _check_non_negative(form: Affine, what: str) -> None:
    if bounds(form)[0] < 0:
        raise AssertionError(f"internal error: {what} of a possibly negative index {form!r}")


def floordiv(form: Affine, divisor: int) -> Affine:
    """``form // divisor`` for a positive constant divisor."""
    if divisor == 1:
        return form
    quotient, rest = _split(form, divisor)
    lo, hi = bounds(rest)
    if 0 <= lo and hi < divisor:
        return quotient
    factor = _common_factor(rest, divisor)
    if factor > 1:
        rest, divisor = _divide_exact(rest, factor), divisor // factor
    peeled = _peel(rest, divisor)
    if peeled is not None:  # (g*y + r) // (g*e) = y // e
        step, coarse, _ = peeled
        return add(quotient, floordiv(coarse, divisor // step))
    inner = _single_atom(rest)
    if isinstance(inner, FloorDiv):
        return add(quotient, floordiv(inner.arg, inner.divisor * divisor))
    _check_non_negative(rest, "division")
    return add(quotient, var(FloorDiv(rest, divisor)))


def mod(form: Affine, divisor: int) -> Affine:
    """``form % divisor`` for a positive constant divisor."""
    if divisor == 1:
        return ZERO
    _, rest = _split(form, divisor)
    lo, hi = bounds(rest)
    if 0 <= lo and hi < divisor:
        return rest
    factor = _common_factor(rest, divisor)
    if factor > 1:
        return scale(mod(_divide_exact(rest, factor), divisor // factor), factor)
    peeled = _peel(rest, divisor)
    if peeled is not None:  # (g*y + r) % (g*e) = g*(y % e) + r
        step, coarse, fine = peeled
        return add(scale(mod(coarse, divisor // step), step), fine)
    inner = _single_atom(rest)
    if isinstance(inner, Mod) and inner.divisor % divisor == 0:
        return mod(inner.arg, divisor)
    _check_non_negative(rest, "modulo")
    return var(Mod(rest, divisor))


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = []
    stride = 1
    for size in reversed(shape):
        strides.append(stride)
        stride *= max(size, 1)
    return tuple(reversed(strides))


# linearize and unravel are memoized: lowering asks again at every load and view, in
# each of its builds of a kernel, and the forms are immutable (so results can be shared).

def linearize(index: Sequence[Affine], shape: Sequence[int]) -> Affine:
    """The flat row-major position of ``index`` in an array of ``shape``."""
    return _linearize(tuple(index), tuple(shape))


@functools.lru_cache(maxsize=1 << 16)
def _linearize(index: Index, shape: tuple[int, ...]) -> Affine:
    return add(*(scale(i, s) for i, s in zip(index, row_major_strides(shape))))


def unravel(flat: Affine, shape: Sequence[int]) -> Index:
    """The index of row-major position ``flat`` in an array of ``shape``."""
    return _unravel(flat, tuple(shape))


@functools.lru_cache(maxsize=1 << 16)
def _unravel(flat: Affine, shape: tuple[int, ...]) -> Index:
    index = []
    for size, stride in zip(shape, row_major_strides(shape)):
        index.append(mod(floordiv(flat, stride), max(size, 1)) if size != 1 else ZERO)
    return tuple(index)


def identity(syms: Sequence[Sym]) -> Index:
    return tuple(var(s) for s in syms)


def free_syms(form: Affine) -> frozenset[Sym]:
    found: set[Sym] = set()
    for atom, _ in form.terms:
        if isinstance(atom, Sym):
            found.add(atom)
        else:
            found |= free_syms(atom.arg)
    return frozenset(found)


def index_syms(index: Sequence[Affine]) -> frozenset[Sym]:
    return frozenset().union(*map(free_syms, index))


def is_affine(form: Affine) -> bool:
    """True when no division or modulo remains (every atom is a loop variable)."""
    return all(isinstance(atom, Sym) for atom, _ in form.terms)


def coefficient(form: Affine, sym: Sym) -> int:
    for atom, coef in form.terms:
        if atom == sym:
            return coef
    return 0


def substitute(form: Affine, mapping: Mapping[Sym, Affine]) -> Affine:
    """Replace loop variables by forms (and re-simplify)."""
    parts = [const(form.const)]
    for atom, coef in form.terms:
        if isinstance(atom, Sym):
            parts.append(scale(mapping.get(atom, var(atom)), coef))
        else:
            inner = substitute(atom.arg, mapping)
            done = floordiv(inner, atom.divisor) if isinstance(atom, FloorDiv) \
                else mod(inner, atom.divisor)
            parts.append(scale(done, coef))
    return add(*parts)


def bare_syms(index: Sequence[Affine]) -> list[Sym] | None:
    """The loop variables of an index whose every coordinate is one bare variable."""
    syms = []
    for form in index:
        atom = _single_atom(form)
        if not isinstance(atom, Sym):
            return None
        syms.append(atom)
    return syms
