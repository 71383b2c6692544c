"""``einsum``: Einstein summation as a chain of ``dot_general`` contractions.

Operands are contracted pairwise in the order NumPy's ``einsum_path`` finds cheapest
for their shapes (``optimize``: "optimal", "greedy", or False for left to right); a
chain like ``ij,jk,k->i`` then costs two matrix-vector products instead of a matrix
product. Before each contraction, a letter repeated within one operand takes its
diagonal, a size-1 axis that broadcasts against a larger one is dropped, and a letter
no one else needs is summed out. Letters shared by both operands and still needed later
are batch axes of the ``dot_general``; shared letters not needed later are contracted.
"""
from __future__ import annotations

import string
from typing import Any, Sequence

from ember import lax
from ember.errors import EmberValueError
from ember.numpy._promotion import ensure_array, result_dtype

__all__ = ["einsum", "einsum_path"]

_ELLIPSIS_LETTERS = [chr(0x3B1 + i) for i in range(24)]  # Greek: never in user subscripts


def _parse(subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """Input terms and output term, with ``...`` replaced by letters for its axes."""
    spec = subscripts.replace(" ", "")
    inputs_spec, arrow, output_spec = spec.partition("->")
    terms = inputs_spec.split(",")
    if len(terms) != len(ndims):
        raise EmberValueError(f"einsum: {len(terms)} input terms in {subscripts!r} for "
                              f"{len(ndims)} operands")
    for letter in spec.replace("...", "").replace(",", "").replace("->", ""):
        if letter not in string.ascii_letters:
            raise EmberValueError(f"einsum: invalid subscript {letter!r} in {subscripts!r}")
    widths = [ndim - len(term.replace("...", "")) if "..." in term else 0
              for term, ndim in zip(terms, ndims)]
    ellipsis = _ELLIPSIS_LETTERS[:max(widths, default=0)]
    expanded = []
    for term, width, ndim in zip(terms, widths, ndims):
        letters = term.replace("...", "".join(ellipsis[len(ellipsis) - width:]))
        if len(letters) != ndim or width < 0:
            raise EmberValueError(f"einsum: term {term!r} does not match an operand of "
                                  f"{ndim} dimensions")
        expanded.append(letters)
    if arrow:
        output = output_spec.replace("...", "".join(ellipsis))
    else:
        counts = "".join(expanded)
        output = "".join(ellipsis) + "".join(sorted(c for c in set(counts) if counts.count(c)
                                                    == 1 and c not in ellipsis))
    for letter in output:
        if output.count(letter) > 1 or not any(letter in t for t in expanded):
            raise EmberValueError(f"einsum: output subscript {letter!r} must appear once in the "
                                  f"output and at least once in the inputs ({subscripts!r})")
    return expanded, output


def _letter_sizes(terms: Sequence[str], arrays: Sequence[Any]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for term, array in zip(terms, arrays):
        for letter, size in zip(term, array.shape):
            known = sizes.get(letter, 1)
            if size != 1 and known not in (1, size):
                raise EmberValueError(f"einsum: subscript {letter!r} has sizes {known} and "
                                      f"{size}, which do not broadcast")
            sizes[letter] = max(known, size) if size != 1 else known
    return sizes


def _take_diagonals(x: Any, term: str) -> tuple[Any, str]:
    from ember.numpy._products import diagonal

    while len(set(term)) != len(term):
        letter = next(c for c in term if term.count(c) > 1)
        first = term.index(letter)
        second = term.index(letter, first + 1)
        x = diagonal(x, 0, first, second)
        term = term[:first] + term[first + 1:second] + term[second + 1:] + letter
    return x, term


def _simplify(x: Any, term: str, needed: set[str], sizes: dict[str, int]) -> tuple[Any, str]:
    """Drop broadcasting size-1 axes and sum out letters nobody else needs."""
    x, term = _take_diagonals(x, term)
    broadcast = [i for i, c in enumerate(term) if x.shape[i] == 1 and sizes[c] > 1]
    if broadcast:
        x = lax.squeeze(x, broadcast)
        term = "".join(c for i, c in enumerate(term) if i not in broadcast)
    unneeded = [i for i, c in enumerate(term) if c not in needed]
    if unneeded:
        x = lax.reduce_sum(x, unneeded)
        term = "".join(c for i, c in enumerate(term) if i not in unneeded)
    return x, term


def _contract_pair(a: Any, la: str, b: Any, lb: str, needed: set[str], precision: Any,
                   preferred: Any) -> tuple[Any, str]:
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in needed]
    summed = [c for c in shared if c not in needed]
    dnums = ((tuple(la.index(c) for c in summed), tuple(lb.index(c) for c in summed)),
             (tuple(la.index(c) for c in batch), tuple(lb.index(c) for c in batch)))
    out = lax.dot_general(a, b, dnums, precision=precision, preferred_element_type=preferred)
    letters = "".join(batch) + "".join(c for c in la if c not in shared) + \
        "".join(c for c in lb if c not in shared)
    return out, letters


def einsum(subscripts: str, /, *operands: Any, out: None = None, optimize: Any = "optimal",
           precision: Any = None, preferred_element_type: Any = None):
    """Einstein summation, e.g. ``einsum('bij,bjk->bik', a, b)``; ``...`` broadcasts."""
    if out is not None:
        raise EmberValueError("einsum(out=...) is not supported: Ember arrays are immutable")
    if not isinstance(subscripts, str):
        raise EmberValueError("einsum: pass the subscripts as a string first "
                              "(the interleaved operand/sublist form is not supported)")
    dtype = result_dtype(*operands)
    arrays = [ensure_array(op, dtype) for op in operands]
    terms, output = _parse(subscripts, [a.ndim for a in arrays])
    sizes = _letter_sizes(terms, arrays)
    pending = list(zip(arrays, terms))
    for positions in _order(terms, output, sizes, optimize):
        group = [pending[i] for i in positions]
        pending = [item for i, item in enumerate(pending) if i not in positions]
        result, letters = group[0]
        for k in range(1, len(group)):
            other, term = group[k]
            later = set(output).union(*[t for _, t in pending], *[t for _, t in group[k + 1:]])
            other, term = _simplify(other, term, later | set(letters), sizes)
            result, letters = _simplify(result, letters, later | set(term), sizes)
            result, letters = _contract_pair(result, letters, other, term, later,
                                             precision, preferred_element_type)
        result, letters = _simplify(result, letters,
                                    set(output).union(*[t for _, t in pending]), sizes)
        pending.append((result, letters))
    (result, letters), = pending
    result, letters = _simplify(result, letters, set(output), sizes)
    result = lax.transpose(result, tuple(letters.index(c) for c in output))
    target = tuple(sizes[c] for c in output)
    if result.shape != target:  # an output letter whose every occurrence had size 1
        result = lax.broadcast_in_dim(result, target, tuple(range(len(target))))
    return result


def _order(terms: Sequence[str], output: str, sizes: dict[str, int],
           optimize: Any) -> list[tuple[int, ...]]:
    """The contractions, as positions in the list of pending operands (contracted ones
    leave it, their result joins its end), as ``np.einsum_path`` orders them."""
    import numpy as np

    if len(terms) == 1:
        return [(0,)]
    ours = sorted(set("".join(terms)))
    if optimize is False or optimize is None or len(terms) == 2 or \
            len(ours) > len(string.ascii_letters):  # (more letters than NumPy knows)
        # left to right: the first two, then each next operand (first in the list) with
        # the result so far (last)
        return [(0, 1)] + [(0, len(terms) - 2 - j) for j in range(len(terms) - 2)]
    strategy = "greedy" if optimize is True or len(terms) > 6 else optimize
    # NumPy's letters are ASCII: rename ours (the ellipsis's are Greek) to unused ones.
    rename = dict(zip(ours, string.ascii_letters))
    spec = ",".join("".join(rename[c] for c in t) for t in terms) + "->" + \
        "".join(rename[c] for c in output)
    shapes = [np.broadcast_to(np.zeros((), np.float32), [sizes.get(c, 1) for c in t])
              for t in terms]
    path, _ = np.einsum_path(spec, *shapes, optimize=strategy)
    return [tuple(step) for step in path[1:]]


def einsum_path(subscripts: str, /, *operands: Any, optimize: Any = "auto") -> tuple[list, str]:
    """NumPy's contraction order for ``einsum(subscripts, *operands)`` and its report
    (computed from the operands' shapes alone): with the same ``optimize``, the order
    ``einsum`` follows."""
    import numpy as np

    shapes = [np.broadcast_to(np.zeros((), np.float32), ensure_array(op).shape)
              for op in operands]
    return np.einsum_path(subscripts, *shapes, optimize=optimize)
