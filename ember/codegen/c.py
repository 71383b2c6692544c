"""C (C11 + OpenMP) tables for the kernel renderer: what the CPU backend compiles.

Half precision is stored as 16-bit and computed in float (helpers from
``ember_kernels.h``); float32 math uses the vectorizable ``ember_*f`` functions of
``ember_math.h`` where it has them, libm otherwise; erf_inv and digamma, which libm
lacks, call ``ember_special.h``. Loops carry OpenMP pragmas:
``parallel for`` over the outermost parallel loop, ``simd`` on contiguous inner loops,
with reduction clauses for accumulators.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ember.codegen.kernel_ir import Accumulator, Buffer, Kernel, Loop
from ember.codegen.render import C_OPERATORS, OpTemplates, Renderer

_INT_TYPES = {f"{p}int{b}": f"{p}int{b}_t" for p in ("", "u") for b in (8, 16, 32, 64)}
STORAGE_TYPES = {**_INT_TYPES, "bool": "uint8_t", "float32": "float", "float64": "double",
                 "float16": "uint16_t", "bfloat16": "uint16_t"}
COMPUTE_TYPES = {**_INT_TYPES, "bool": "int", "float32": "float", "float64": "double",
                 "float16": "float", "bfloat16": "float"}

# The op rows (``ember.ops.elementwise``) hold what computes each op; this renderer adds
# round's half-to-even variant (rounding_method=1).
RENDERER_ROWS = {"round_even": {"float": "{f_rint}({0})"}}
OP_TEMPLATES = OpTemplates(("c",), RENDERER_ROWS)

CONVERSIONS = {
    ("float", "int"): "({0} != {0} ? ({T})0 : {0} <= ({S}){MIN} ? {MIN} : "
                      "{0} >= ({S}){MAX} ? {MAX} : ({T}){0})",
    ("float", "uint"): "({0} != {0} ? ({T})0 : {0} <= 0 ? ({T})0 : "
                       "{0} >= ({S}){MAX} ? {MAX} : ({T}){0})",
    ("float", "bool"): "({0} != 0)",
    ("int", "bool"): "({0} != 0)",
    ("uint", "bool"): "({0} != 0)",
}

LOADS = {"float16": "ember_f16_to_f32({0})", "bfloat16": "ember_bf16_to_f32({0})",
         "bool": "(int){0}"}
STORES = {"float16": "ember_f32_to_f16({0})", "bfloat16": "ember_f32_to_bf16({0})",
          "bool": "(uint8_t)({0} != 0)"}

# float32 through ember_kernels.h's helpers; float64 through a union compound literal,
# which reads the bits without undefined behaviour (C99).
FLOAT_BITS = {
    "float32": ("ember_f32_to_bits({0})", "ember_bits_to_f32({0})"),
    "float64": ("((union {{ double f; uint64_t u; }}){{ .f = {0} }}).u",
                "((union {{ uint64_t u; double f; }}){{ .u = {0} }}).f"),
}

_REDUCTION_CLAUSE = {**C_OPERATORS, "max": "max", "min": "min"}


class CRenderer(Renderer):
    storage_types = STORAGE_TYPES
    compute_types = COMPUTE_TYPES
    op_templates = OP_TEMPLATES
    conversions = CONVERSIONS
    load_templates = LOADS
    store_templates = STORES
    float_bits = FLOAT_BITS
    global_qualifier = ""  # of a pointer parameter
    restrict = "restrict"

    def __init__(self, threads: int = 1, vector_math: Iterable[str] = ()) -> None:
        """``vector_math``: float32 functions available as ``ember_<name>f``."""
        self.threads = threads
        self.vector_math = frozenset(vector_math)

    def kernel_header(self, kernel: Kernel, params: list[tuple[Buffer, bool]]) -> str:
        return f"static void {kernel.name}({self.parameters(params) or 'void'})"

    def parameters(self, params: list[tuple[Buffer, bool]]) -> str:
        """A kernel's parameter list: a pointer per buffer, const unless written."""
        return ", ".join(f"{self.global_qualifier}{'' if written else 'const '}"
                         f"{self.storage_types[buffer.dtype.name]} *{self.restrict} {buffer.name}"
                         for buffer, written in params)

    def loop_header(self, loop: Loop) -> list[str]:
        sym = loop.sym
        clauses = []
        if loop.parallel:  # guided: a thread that starts late (shared cores) takes less
            schedule = "simd:guided" if loop.vector else "guided"
            clauses.append(f"num_threads({self.threads}) schedule({schedule})")
        for acc in loop.accumulators if (loop.parallel or loop.vector) else ():
            clauses += self.reduction_clauses(acc)
        directive = " ".join(word for word, on in (("parallel for", loop.parallel),
                                                   ("simd", loop.vector)) if on)
        pragma = [f"#pragma omp {directive} {' '.join(clauses)}".rstrip()] if directive else []
        header = f"for ({self.index_type} {sym.name} = 0; {sym.name} < {sym.extent}; " \
                 f"{sym.name}++) {{"
        return [*pragma, header]

    def loop_lines(self, loop: Loop, depth: int) -> list[str]:
        if loop.parallel and loop.accumulators:
            return self.ordered_reduction_lines(loop, depth)
        return super().loop_lines(loop, depth)

    def ordered_reduction_lines(self, loop: Loop, depth: int) -> list[str]:
        """A reduction over threads in a fixed order, so that its result is the same bit
        for bit from run to run. (OpenMP's reduction clause combines the threads' parts
        in the order they finish, and a guided schedule deals out different iterations
        each run.) Thread t reduces the t-th of ``threads`` equal blocks into its own
        copy of each accumulator; the copies are then combined in thread order."""
        pad, inner = self.indent_unit * depth, self.indent_unit * (depth + 1)
        sym, count = loop.sym, self.threads
        # each part of each accumulator's state, one copy per thread in <part>_part
        states = [state for acc in loop.accumulators for state in self.components(acc)]
        lines = [pad + "{", *(f"{inner}{ctype} {name}_part[{count}];" for name, ctype, _ in states)]
        lines.append(f"{inner}for (int ember_t = 0; ember_t < {count}; ember_t++) {{")
        lines += [f"{inner}  {name}_part[ember_t] = {identity};" for name, _, identity in states]
        lines += [f"{inner}}}", f"{inner}#pragma omp parallel num_threads({count})",
                  f"{inner}{{"]
        body = self.indent_unit * (depth + 2)
        lines += [f"{body}const {self.index_type} ember_t = omp_get_thread_num(), "
                  "ember_nt = omp_get_num_threads();",
                  f"{body}const {self.index_type} ember_lo = {sym.extent} * ember_t / ember_nt,"
                  f" ember_hi = {sym.extent} * (ember_t + 1) / ember_nt;"]
        for acc in loop.accumulators:
            lines += [body + text for text in self.acc_init(acc)]  # this thread's copy
        if loop.vector:
            clauses = [c for acc in loop.accumulators for c in self.reduction_clauses(acc)]
            lines.append(f"{body}#pragma omp simd {' '.join(clauses)}")
        lines.append(f"{body}for ({self.index_type} {sym.name} = ember_lo; {sym.name} < "
                     f"ember_hi; {sym.name}++) {{")
        lines += self.block(loop.body, depth + 3)
        lines.append(body + "}")
        lines += [f"{body}{name}_part[ember_t] = {name};" for name, _, _ in states]
        lines += [f"{inner}}}", f"{inner}for (int ember_t = 0; ember_t < {count}; ember_t++) {{"]
        for acc in loop.accumulators:
            part = f"{acc.name}_part[ember_t]"
            lines += [f"{inner}  {text}" for text in self.acc_update(acc, part, None)]
            if self.tracks_nan(acc):
                lines.append(f"{inner}  {acc.name}_nan |= {acc.name}_nan_part[ember_t];")
        lines += [f"{inner}}}", pad + "}"]
        return lines

    def reduction_clauses(self, acc: Accumulator) -> list[str]:
        symbol = _REDUCTION_CLAUSE[acc.kind]
        clauses = [f"reduction({symbol}:{acc.name})"]
        if self.tracks_nan(acc):
            clauses.append(f"reduction(|:{acc.name}_nan)")
        return clauses

    def math_function(self, name: str, dtype: np.dtype) -> str:
        if name == "sigmoid" and not (dtype.name != "float64" and name in self.vector_math):
            return "ember_logistic" if dtype.name == "float64" else "ember_logisticf"
        if dtype.name == "float64":
            return name
        if name in self.vector_math:
            return f"ember_{name}f"
        return f"{name}f"

    def float_literal(self, value: float, dtype: np.dtype) -> str:
        suffix = "" if dtype.name == "float64" else "f"
        if math.isnan(value):
            return "NAN" if suffix else "((double)NAN)"
        if math.isinf(value):
            text = "INFINITY" if suffix else "((double)INFINITY)"
            return text if value > 0 else f"(-{text})"
        return f"{value!r}{suffix}"  # the shortest repr parses back to the same value
