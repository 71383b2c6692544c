"""Index forms: simplification never changes a value, and the patterns fusion relies on
cancel (unravel then linearize, splitting merged loops)."""
from __future__ import annotations

import itertools

import hypothesis
import hypothesis.strategies as st

from ember.codegen import indexing as ix
from ember.codegen.indexing import Affine, FloorDiv, Mod, Sym


def evaluate(form: Affine, env: dict[Sym, int]) -> int:
    total = form.const
    for atom, coef in form.terms:
        if isinstance(atom, Sym):
            value = env[atom]
        elif isinstance(atom, FloorDiv):
            value = evaluate(atom.arg, env) // atom.divisor
        else:
            assert isinstance(atom, Mod)
            value = evaluate(atom.arg, env) % atom.divisor
        total += coef * value
    return total


def assignments(syms):
    for values in itertools.product(*[range(s.extent) for s in syms]):
        yield dict(zip(syms, values))


I, J = Sym("i", 8), Sym("j", 12)


def test_unravel_then_linearize_is_the_identity():
    flat = Sym("f", 96)
    for shape in [(8, 12), (2, 4, 12), (96,), (1, 96), (4, 1, 24)]:
        assert ix.linearize(ix.unravel(ix.var(flat), shape), shape) == ix.var(flat)


def test_splitting_a_merged_loop_gives_the_loop_variables_back():
    merged = ix.linearize((ix.var(I), ix.var(J)), (8, 12))
    assert ix.unravel(merged, (8, 12)) == (ix.var(I), ix.var(J))
    assert ix.is_affine(ix.linearize(ix.unravel(merged, (96,)), (96,)))


def test_bounds_decide_division_and_modulo():
    assert ix.floordiv(ix.var(J), 16) == ix.ZERO
    assert ix.mod(ix.var(J), 16) == ix.var(J)
    assert ix.floordiv(ix.add(ix.scale(ix.var(I), 12), ix.var(J)), 12) == ix.var(I)
    assert ix.bounds(ix.add(ix.scale(ix.var(I), -2), ix.const(20))) == (6, 20)


def test_remainders_stay_non_negative_for_c_division():
    form = ix.add(ix.const(3), ix.scale(ix.var(I), -1))  # 3 - i, negative for i > 3
    lifted = ix.floordiv(ix.add(form, ix.const(8)), 2)  # as pad lowering builds them
    assert ix.bounds(lifted)[0] >= 0
    for env in assignments([I]):
        assert evaluate(ix.mod(ix.add(form, ix.const(8)), 4), env) == (3 - env[I] + 8) % 4


def test_substitute_replaces_loop_variables():
    form = ix.add(ix.scale(ix.var(I), 12), ix.var(J))
    flat = Sym("f", 96)
    mapping = {I: ix.floordiv(ix.var(flat), 12), J: ix.mod(ix.var(flat), 12)}
    assert ix.substitute(form, mapping) == ix.var(flat)


@hypothesis.given(data=st.data())
def test_simplified_forms_evaluate_like_the_operations_they_stand_for(data):
    syms = [Sym(f"s{k}", data.draw(st.integers(1, 5))) for k in range(data.draw(st.integers(1, 3)))]
    coefs = [data.draw(st.integers(0, 7)) for _ in syms]
    const = data.draw(st.integers(0, 6))
    ops = data.draw(st.lists(st.tuples(st.sampled_from(["div", "mod", "reshape"]),
                                       st.integers(1, 9), st.integers(1, 5)), max_size=3))
    form = ix.add(ix.const(const), *[ix.scale(ix.var(s), c) for s, c in zip(syms, coefs)])
    for op, divisor, size in ops:
        if op == "div":
            form = ix.floordiv(form, divisor)
        elif op == "mod":
            form = ix.mod(form, divisor)
        else:
            form = ix.linearize(ix.unravel(form, (size, divisor)), (size, divisor))
    for env in assignments(syms):
        value = const + sum(c * env[s] for s, c in zip(syms, coefs))
        for op, divisor, size in ops:
            if op == "div":
                value //= divisor
            elif op == "mod":
                value %= divisor
            else:
                value %= size * divisor  # unravel wraps at the shape's size
        assert evaluate(form, env) == value
        lo, hi = ix.bounds(form)
        assert lo <= value <= hi


def test_dividing_blocks_divides_the_block_index():
    """(256*o + i) // 2048 with i < 256 is o // 8: a split loop's offset cancels, so two
    spellings of one position become one form (one load, loops that merge)."""
    outer, inner = Sym("o", 64), Sym("i", 256)
    form = ix.add(ix.scale(ix.var(outer), 256), ix.var(inner))
    assert ix.floordiv(form, 2048) == ix.floordiv(ix.var(outer), 8)
    assert ix.mod(form, 2048) == ix.add(ix.scale(ix.mod(ix.var(outer), 8), 256), ix.var(inner))
    linear = ix.add(ix.scale(ix.floordiv(form, 2048), 524288),
                    ix.scale(ix.mod(ix.var(outer), 8), 65536))
    assert linear == ix.scale(ix.var(outer), 65536)
