"""What a target computes natively: the facts every fusion policy is built from.

An equation is native when the target renderer's tables cover its primitive for its
dtypes (complex numbers and a few special functions are not covered yet: they run on
the host). A ``dot_general`` over float32 / float64 whose operands BLAS can read runs as
a GEMM call once it is big enough to be worth the call; smaller or other dtypes become
generated loops, fused like any reduction. Every target asks the same questions, so
every backend draws the same kernel boundaries.
"""
from __future__ import annotations

import numpy as np

from ember.codegen import access, indexing as ix
from ember.codegen.render import Renderer
from ember.codegen.gather import SCATTER_COMBINE
from ember.codegen.gemm import operand_matrix, operand_syms
from ember.ir.graph import Eqn
from ember.ops.elementwise import ELEMENTWISE

MIN_GEMM_FLOPS = 2 * 24 ** 3  # below this, a generated loop beats the BLAS call
_BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_HALF_DTYPES = ("bfloat16", "float16")


def native(renderer: Renderer, eqn: Eqn) -> bool:
    avals = [a.aval for a in eqn.inputs] + [v.aval for v in eqn.outputs]
    if any(a.dtype.name not in renderer.compute_types for a in avals):
        return False
    name = eqn.prim.name
    if access.is_view(eqn) or access.is_reduction(eqn) or name in ("iota", "pad",
                                                                       "concatenate"):
        return True
    if access.is_gather_like(eqn) or access.is_ordered(eqn):  # (scatters combine by an op)
        combine = SCATTER_COMBINE.get(name)
        return combine is None or renderer.supports(combine, eqn.outputs[0].aval.dtype)
    if name not in ELEMENTWISE:
        return False
    operand = eqn.inputs[1 if name == "select_n" else 0].aval.dtype
    if name == "integer_pow" and eqn.params["y"] < 0 and operand.kind in "iub":
        return False
    return renderer.supports(name, operand)


def gemm_eligible(eqn: Eqn, half: bool = False) -> bool:
    """Whether ``eqn`` is a GEMM worth a library call (any target: BLAS, a GPU GEMM
    kernel), so that every backend draws the same kernel boundaries; with ``half``
    (a target whose GEMM takes them) also bfloat16 or float16 operands with float32
    products (``GemmPlan.operands``) or products of their own type."""
    if eqn.prim.name != "dot_general":
        return False
    operands = {eqn.inputs[0].aval.dtype, eqn.inputs[1].aval.dtype}
    result = eqn.outputs[0].aval.dtype
    if len(operands) != 1:
        return False
    operand = operands.pop()
    if not (operand == result and operand in _BLAS_DTYPES
            or half and operand in _HALF_DTYPES and result in (np.float32, operand)):
        return False
    for position, operand in enumerate(eqn.inputs):
        syms = operand_syms(operand.aval.shape, "g")
        if operand_matrix(eqn, position, operand.aval.shape, ix.identity(syms), syms) is None:
            return False
    (contracting, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.inputs[0].aval
    k = int(np.prod([lhs.shape[d] for d in contracting], dtype=np.int64))
    return 2 * eqn.outputs[0].aval.size * k >= MIN_GEMM_FLOPS
