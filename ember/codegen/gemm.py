"""Matrix-multiply planning: ``dot_general`` as (batched) row-major GEMM calls.

Each operand is a strided view of a buffer (transposes and reshapes of the operand are
folded into strides, the way BLAS's transpose flags and leading dimensions allow). An
operand fits when its free axes and its contracting axes each collapse into one strided
axis and one of the two has unit stride. The output is a fresh row-major buffer
``(batch..., lhs free..., rhs free...)``. Targets render a plan as their library call
(CBLAS on CPUs; cuBLAS would take the same plan).
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ember.codegen import indexing as ix
from ember.codegen.access import dot_free_dims
from ember.codegen.indexing import Index, Sym
from ember.ir.graph import Eqn


@dataclass(frozen=True)
class Matrix:
    """A (batch of) matrices in a buffer: ``rows x cols`` with row-major ``ld``;
    ``transposed`` means the memory holds the ``cols x rows`` matrix instead."""

    rows: int
    cols: int
    transposed: bool
    ld: int
    offset: int
    batch_strides: tuple[int, ...]


@dataclass(frozen=True)
class GemmPlan:
    """``C[item] = A[item] @ B[item]`` for every batch item. ``c`` is where the product
    goes: row-major (never ``transposed``: ``plan_gemm`` swaps the operands instead),
    with its own leading dimension and batch strides, as a consumer's transpose or
    reshape lays it out (``product_matrix``); None: a fresh contiguous (batch, m, n)
    buffer."""

    dtype: np.dtype
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    a: Matrix
    b: Matrix
    c: Matrix | None = None
    # The operands' dtype where it is not the result's: 16-bit floats (bfloat16,
    # float16) multiplied into float32 sums and results (``preferred_element_type``).
    operands: np.dtype | None = None
    # Which of A and B are float32 buffers rounded to ``operands`` as they are packed (a
    # cast fused into the product, ``x.astype(bfloat16) @ w``): "", "a", "b" or "ab".
    casts: str = ""

    @property
    def operand_dtype(self) -> np.dtype:
        return self.dtype if self.operands is None else self.operands

    @property
    def output(self) -> Matrix:
        """``c``, with the fresh contiguous layout spelled out."""
        if self.c is not None:
            return self.c
        strides = ix.row_major_strides((*self.batch, self.m, self.n))[:len(self.batch)]
        return Matrix(self.m, self.n, False, max(self.n, 1), 0, tuple(strides))

    @property
    def flops(self) -> float:
        return 2.0 * int(np.prod(self.batch, dtype=np.int64)) * self.m * self.n * self.k


def operand_syms(shape: Sequence[int], prefix: str) -> tuple[Sym, ...]:
    return tuple(Sym(f"{prefix}{d}", n) for d, n in enumerate(shape))


def _strides(index: Index, base_shape: Sequence[int], syms: Sequence[Sym]) -> tuple[list[int], int] | None:
    flat = ix.linearize(index, base_shape)
    if not ix.is_affine(flat):
        return None
    return [ix.coefficient(flat, s) for s in syms], flat.const


def collapse(extents: Sequence[int], strides: Sequence[int]) -> tuple[int, int] | None:
    """One (extent, stride) for axes laid out row-major among themselves, else None."""
    kept = [(n, s) for n, s in zip(extents, strides) if n != 1]
    total = int(np.prod(extents, dtype=np.int64))
    if not kept:
        return total, 0
    for (_, outer), (n_inner, inner) in itertools.pairwise(kept):
        if outer != inner * n_inner:
            return None
    return total, kept[-1][1]


def _matrix(rows: tuple[int, int], cols: tuple[int, int], offset: int,
            batch_strides: tuple[int, ...]) -> Matrix | None:
    """A ``rows x cols`` matrix from (extent, stride) pairs: row-major when the columns
    are contiguous, transposed when the rows are; None otherwise."""
    (n_rows, s_rows), (n_cols, s_cols) = rows, cols
    if (n_cols <= 1 or s_cols == 1) and (n_rows <= 1 or s_rows >= n_cols):
        ld = s_rows if n_rows > 1 else n_cols
        return Matrix(n_rows, n_cols, False, max(ld, 1), offset, batch_strides)
    if (n_rows <= 1 or s_rows == 1) and (n_cols <= 1 or s_cols >= n_rows):
        ld = s_cols if n_cols > 1 else n_rows
        return Matrix(n_rows, n_cols, True, max(ld, 1), offset, batch_strides)
    return None


def operand_matrix(eqn: Eqn, position: int, base_shape: Sequence[int], index: Index,
                   syms: Sequence[Sym]) -> Matrix | None:
    """Operand ``position`` of ``dot_general`` read through ``index`` from a buffer of
    ``base_shape``, as a matrix (lhs: rows = free, cols = contracting; rhs: rows =
    contracting, cols = free), or None when BLAS cannot read it in place."""
    found = _strides(index, base_shape, syms)
    if found is None:
        return None
    strides, offset = found
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    contracting, batch = (lc, lb) if position == 0 else (rc, rb)
    shape = [s.extent for s in syms]
    free = dot_free_dims(len(shape), contracting, batch)
    free_axis = collapse([shape[d] for d in free], [strides[d] for d in free])
    contract_axis = collapse([shape[d] for d in contracting], [strides[d] for d in contracting])
    if free_axis is None or contract_axis is None:
        return None
    batch_strides = tuple(strides[d] for d in batch)
    if position == 0:
        return _matrix(free_axis, contract_axis, offset, batch_strides)
    return _matrix(contract_axis, free_axis, offset, batch_strides)


def plan_gemm(eqn: Eqn, lhs: Matrix, rhs: Matrix, out: Matrix | None = None,
              casts: tuple[bool, bool] = (False, False)) -> GemmPlan:
    """The plan of ``eqn`` (``out``: where its product goes, None for a fresh buffer;
    ``casts``: whether lhs, rhs are float32 buffers cast to the operands' type as they
    are packed). A transposed ``out`` is written as ``C^T = B^T A^T``: the plan's A is
    then ``rhs`` and its B ``lhs`` (the caller passes their buffers in that order)."""
    _, (lb, _) = eqn.params["dimension_numbers"]
    lhs_shape = eqn.inputs[0].aval.shape
    batch = tuple(lhs_shape[d] for d in lb)
    dtype = eqn.outputs[0].aval.dtype
    operands = eqn.inputs[0].aval.dtype
    operands = None if operands == dtype else operands
    if out is not None and out.transposed:  # C^T = B^T A^T, stored row-major
        return GemmPlan(dtype, batch, rhs.cols, lhs.rows, lhs.cols, _flipped(rhs),
                        _flipped(lhs), _flipped(out), operands, _casts(casts[::-1]))
    return GemmPlan(dtype=dtype, batch=batch, m=lhs.rows, n=rhs.cols, k=lhs.cols, a=lhs,
                    b=rhs, c=out, operands=operands, casts=_casts(casts))


def _casts(casts: tuple[bool, bool]) -> str:
    return "a" * casts[0] + "b" * casts[1]


def _flipped(matrix: Matrix) -> Matrix:
    """The transpose of ``matrix``: the same memory read the other way."""
    return Matrix(matrix.cols, matrix.rows, not matrix.transposed, matrix.ld, matrix.offset,
                  matrix.batch_strides)


# --- writing a product through its consumer's views ----------------------------------

def product_matrix(eqn: Eqn, strides: Sequence[int]) -> Matrix | None:
    """Where ``eqn``'s product lands when its element ``(batch..., i, j)`` goes to
    ``sum(index * strides)`` of another buffer (``strides``: per product axis, from
    ``view_strides``), as a matrix BLAS can write; None when the free axes do not each
    collapse into one strided axis, or neither of them is contiguous."""
    (lc, _), (lb, _) = eqn.params["dimension_numbers"]
    shape = eqn.outputs[0].aval.shape
    nb, n_lhs = len(lb), eqn.inputs[0].aval.ndim - len(lc) - len(lb)
    rows = collapse(shape[nb:nb + n_lhs], strides[nb:nb + n_lhs])
    cols = collapse(shape[nb + n_lhs:], strides[nb + n_lhs:])
    if rows is None or cols is None:
        return None
    return _matrix(rows, cols, 0, tuple(strides[:nb]))


def view_strides(chain: Sequence[Eqn], strides: Sequence[int]) -> tuple[int, ...] | None:
    """The strides at which the operand of a chain of views (``chain``: the last view
    first) sits in the buffer of the chain's result, whose strides are ``strides``; None
    when a view is not a one-to-one relabelling of elements that strides express."""
    strides = tuple(strides)
    for eqn in chain:
        strides = _operand_strides(eqn, strides)
        if strides is None:
            return None
    return strides


def _operand_strides(eqn: Eqn, strides: tuple[int, ...]) -> tuple[int, ...] | None:
    name, params = eqn.prim.name, eqn.params
    in_shape = eqn.inputs[0].aval.shape
    if name in ("stop_gradient", "name"):
        return strides
    if name == "transpose":
        found = [0] * len(strides)
        for k, axis in enumerate(params["permutation"]):
            found[axis] = strides[k]
        return tuple(found)
    if name in ("reshape", "squeeze") or (
            name == "broadcast_in_dim" and math.prod(in_shape) == math.prod(
                eqn.outputs[0].aval.shape)):
        return _reshaped_strides(eqn.outputs[0].aval.shape, strides, in_shape)
    return None


def _reshaped_strides(shape: Sequence[int], strides: Sequence[int],
                      new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """Strides of ``new_shape`` viewing the same elements, in the same row-major order,
    as ``shape`` with ``strides`` (NumPy's reshape without a copy), or None."""
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = [d for d, n in enumerate(new_shape) if n != 1]
    found = [0] * len(new_shape)
    i = j = 0
    while i < len(old) and j < len(new):
        i_end, j_end = i + 1, j + 1
        old_size, new_size = old[i][0], new_shape[new[j]]
        while old_size != new_size:  # the smallest runs of axes of equal size
            if old_size < new_size:
                old_size *= old[i_end][0]
                i_end += 1
            else:
                new_size *= new_shape[new[j_end]]
                j_end += 1
        if any(old[a][1] != old[a + 1][1] * old[a + 1][0] for a in range(i, i_end - 1)):
            return None  # the run is not one strided axis
        stride = old[i_end - 1][1]
        for d in reversed(new[j:j_end]):
            found[d] = stride
            stride *= new_shape[d]
        i, j = i_end, j_end
    return tuple(found)
