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
from ember.codegen.render import Renderer, dtype_class

_INT_TYPES = {f"{p}int{b}": f"{p}int{b}_t" for p in ("", "u") for b in (8, 16, 32, 64)}
STORAGE_TYPES = {**_INT_TYPES, "bool": "uint8_t", "float32": "float", "float64": "double",
                 "float16": "uint16_t", "bfloat16": "uint16_t"}
COMPUTE_TYPES = {**_INT_TYPES, "bool": "int", "float32": "float", "float64": "double",
                 "float16": "float", "bfloat16": "float"}

_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_SHIFT_OUT = "(uint64_t)(int64_t){1} >= {BITS}"

OP_TEMPLATES = {
    "neg": {"any": "(-{0})"},
    "sign": {"float": "({0} != {0} ? {0} : ({T})(({0} > 0) - ({0} < 0)))",
             "int": "(({T})(({0} > 0) - ({0} < 0)))", "uint": "(({T})({0} > 0))"},
    "floor": {"float": "{f_floor}({0})"},
    "ceil": {"float": "{f_ceil}({0})"},
    "round": {"float": "{f_round}({0})"},
    "round_even": {"float": "{f_rint}({0})"},
    "is_finite": {"float": "(({0} - {0}) == 0)"},
    "logistic": {"float": "{f_sigmoid}({0})"},
    "rsqrt": {"float": "(({T})1 / {f_sqrt}({0}))"},
    "lgamma": {"float": "({0} < 0 && {0} - {0} != 0 ? {0} : {f_lgamma}({0}))"},  # -inf: -inf
    "real": {"float": "{0}"},
    "imag": {"float": "(({T})0)"},
    "conj": {"float": "{0}"},
    "abs": {"float": "{f_fabs}({0})", "int": "({0} < 0 ? ({T})-{0} : {0})", "uint": "{0}"},
    "not": {"bool": "(!{0})", "int": "(({T})~{0})", "uint": "(({T})~{0})"},
    "square": {"any": "({0} * {0})"},
    "population_count": {
        "int": "(({T})__builtin_popcountll((uint64_t)({U}){0}))",
        "uint": "(({T})__builtin_popcountll((uint64_t){0}))"},
    "add": {"any": "({0} + {1})"},
    "sub": {"any": "({0} - {1})"},
    "mul": {"any": "({0} * {1})"},
    "div": {"float": "({0} / {1})",
            "int": "({1} == 0 ? ({T})-1 : {1} == -1 ? ({T})(0 - ({U}){0}) : ({T})({0} / {1}))",
            "uint": "({1} == 0 ? {MAX} : ({T})({0} / {1}))"},
    "rem": {"float": "{f_fmod}({0}, {1})",
            "int": "({1} == 0 ? {0} : {1} == -1 ? ({T})0 : ({T})({0} % {1}))",
            "uint": "({1} == 0 ? {0} : ({T})({0} % {1}))"},
    "pow": {"float": "{f_pow}({0}, {1})",
            "int": "(({T})ember_ipow((uint64_t){0}, (int64_t){1}))",
            "uint": "(({T})ember_ipow((uint64_t){0}, (int64_t){1}))"},
    "max": {"any": "(({0} >= {1} || {0} != {0}) ? {0} : {1})"},
    "min": {"any": "(({0} <= {1} || {0} != {0}) ? {0} : {1})"},
    "atan2": {"float": "{f_atan2}({0}, {1})"},
    # (half precision would need the next 16-bit value: not covered)
    "nextafter": {"float32": "{f_nextafter}({0}, {1})", "float64": "{f_nextafter}({0}, {1})"},
    "and": {"bool": "({0} & {1})", "int": "({0} & {1})", "uint": "({0} & {1})"},
    "or": {"bool": "({0} | {1})", "int": "({0} | {1})", "uint": "({0} | {1})"},
    "xor": {"bool": "({0} ^ {1})", "int": "({0} ^ {1})", "uint": "({0} ^ {1})"},
    "shift_left": {"int": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})(({{U}}){{0}} << {{1}}))",
                   "uint": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})({{0}} << {{1}}))"},
    "shift_right_logical": {
        "int": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})(({{U}}){{0}} >> {{1}}))",
        "uint": f"({_SHIFT_OUT} ? ({{T}})0 : ({{T}})({{0}} >> {{1}}))"},
    "shift_right_arithmetic": {
        "int": "({0} >> ({1} < 0 ? 0 : {1} >= {BITS} ? {BITS} - 1 : {1}))",
        "uint": "({1} >= {BITS} ? ({T})0 : ({T})({0} >> {1}))"},
    **{name: {"any": f"({{0}} {symbol} {{1}})"} for name, symbol in _COMPARE.items()},
}
for _name in ("exp", "exp2", "log", "log1p", "expm1", "tanh", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "cbrt",
              "erf", "erfc"):
    OP_TEMPLATES[_name] = {"float": f"{{f_{_name}}}({{0}})"}

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

# Special functions of ``ember_special.h`` (C only: GPU dialects build their tables from
# OP_TEMPLATES, so these stay host calls there).
SPECIAL_TEMPLATES = {
    "erf_inv": {"float64": "ember_erf_inv({0})", "float": "ember_erf_invf({0})"},
    "digamma": {"float64": "ember_digamma({0})", "float": "ember_digammaf({0})"},
}

_REDUCTION_CLAUSE = {"sum": "+", "prod": "*", "max": "max", "min": "min", "and": "&",
                     "or": "|", "xor": "^"}


class CRenderer(Renderer):
    storage_types = STORAGE_TYPES
    compute_types = COMPUTE_TYPES
    op_templates = {**OP_TEMPLATES, **SPECIAL_TEMPLATES}
    conversions = CONVERSIONS
    load_templates = LOADS
    store_templates = STORES

    def __init__(self, threads: int = 1, vector_math: Iterable[str] = ()) -> None:
        """``vector_math``: float32 functions available as ``ember_<name>f``."""
        self.threads = threads
        self.vector_math = frozenset(vector_math)

    def kernel_header(self, kernel: Kernel, params: list[tuple[Buffer, bool]]) -> str:
        decls = []
        for buffer, written in params:
            const = "" if written else "const "
            decls.append(f"{const}{self.storage_types[buffer.dtype.name]} *restrict "
                         f"{buffer.name}")
        return f"static void {kernel.name}({', '.join(decls) or 'void'})"

    def loop_header(self, loop: Loop) -> list[str]:
        sym = loop.sym
        clauses = []
        if loop.parallel:  # guided: a thread that starts late (shared cores) takes less
            schedule = "simd:guided" if loop.vector else "guided"
            clauses.append(f"num_threads({self.threads}) schedule({schedule})")
        for acc in loop.accumulators if (loop.parallel or loop.vector) else ():
            clauses += self.reduction_clauses(acc)
        pragma = []
        if loop.parallel and loop.vector:
            pragma = ["#pragma omp parallel for simd " + " ".join(clauses)]
        elif loop.parallel:
            pragma = ["#pragma omp parallel for " + " ".join(clauses)]
        elif loop.vector:
            pragma = [("#pragma omp simd " + " ".join(clauses)).rstrip()]
        header = f"for ({self.index_type} {sym.name} = 0; {sym.name} < {sym.extent}; " \
                 f"{sym.name}++) {{"
        return [*pragma, header]

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

    def reduction_identity(self, acc: Accumulator) -> str:
        dtype = acc.dtype
        kind = acc.kind
        if kind in ("sum", "or", "xor"):
            return self.constant(0, dtype)
        if kind == "prod":
            return self.constant(1, dtype)
        if kind == "and":
            return self.constant(True, dtype) if dtype_class(dtype) == "bool" \
                else f"(({self.ctype(dtype)})~({self.ctype(dtype)})0)"
        lowest = kind in ("max", "argmax")
        if dtype_class(dtype) == "float":
            return self.float_literal(-math.inf if lowest else math.inf, dtype)
        if dtype_class(dtype) == "bool":
            return "0" if lowest else "1"
        info = np.iinfo(dtype)
        return self.constant(info.min if lowest else info.max, dtype)
