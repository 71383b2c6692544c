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
    dtype: np.dtype
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    a: Matrix
    b: Matrix

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


def _collapse(extents: Sequence[int], strides: Sequence[int]) -> tuple[int, int] | None:
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
    free_axis = _collapse([shape[d] for d in free], [strides[d] for d in free])
    contract_axis = _collapse([shape[d] for d in contracting], [strides[d] for d in contracting])
    if free_axis is None or contract_axis is None:
        return None
    batch_strides = tuple(strides[d] for d in batch)
    if position == 0:
        return _matrix(free_axis, contract_axis, offset, batch_strides)
    return _matrix(contract_axis, free_axis, offset, batch_strides)


def plan_gemm(eqn: Eqn, lhs: Matrix, rhs: Matrix) -> GemmPlan:
    _, (lb, _) = eqn.params["dimension_numbers"]
    lhs_shape = eqn.inputs[0].aval.shape
    batch = tuple(lhs_shape[d] for d in lb)
    return GemmPlan(dtype=eqn.outputs[0].aval.dtype, batch=batch, m=lhs.rows, n=rhs.cols,
                    k=lhs.cols, a=lhs, b=rhs)
