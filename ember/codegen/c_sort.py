"""``sort`` and ``top_k`` as C functions of the module (instead of host calls).

Both order the rows along one axis by a stable bottom-up merge sort of an index
permutation, the rows split across OpenMP threads (each thread its own scratch), then
gather every operand through the permutation. The comparison orders as the reference:

- ``sort``: ascending, lexicographic over the first ``num_keys`` operands, NaNs last,
  -0.0 equal to 0.0; equal keys keep their order (the reference is always stable);
- ``top_k``: descending on the last axis, NaNs first, equal values in index order; the
  first ``k`` of each row and their int32 indices.

Complex numbers are not covered (they stay host calls).
"""
from __future__ import annotations

import numpy as np

from ember.ir.graph import Eqn, Var

# top_k keeps its best k in order while it scans a row (at most n * k moves, about n for
# most data) when k is at most this; a larger k sorts the whole row.
MAX_SELECTED = 32
RUN = 16  # the merge sort starts from runs of this many, sorted by insertion

_DTYPES = {"float16", "bfloat16", "float32", "float64", "bool", "int8", "int16", "int32", "int64", "uint8",
           "uint16", "uint32", "uint64"}


def supported(eqn: Eqn) -> bool:
    """Whether ``eqn`` is a sort or top_k this module renders."""
    if eqn.prim.name not in ("sort", "top_k"):
        return False
    return all(isinstance(a, Var) and a.aval.dtype.name in _DTYPES for a in eqn.inputs)


def render_call(eqn: Eqn, name: str, inputs: list[str], outputs: list[str],
                ctypes: dict[str, str], threads: int) -> tuple[str, list[str]]:
    """(C definition, statements of its call) for ``eqn``; ``inputs`` and ``outputs`` are
    the C pointer expressions of its operands and results (None: a result nothing reads),
    ``ctypes`` the storage type of each dtype name."""
    shape = eqn.inputs[0].aval.shape
    if eqn.prim.name == "sort":
        axis, keys, descending, kept = eqn.params["dimension"], eqn.params["num_keys"], \
            False, None
    else:
        axis, keys, descending, kept = len(shape) - 1, 1, True, eqn.params["k"]
    n = shape[axis]
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    kept = n if kept is None else kept
    if outer * inner == 0 or kept == 0:
        return "", []
    in_types = [ctypes[a.aval.dtype.name] for a in eqn.inputs]
    out_types = [ctypes[v.aval.dtype.name] for v in eqn.outputs]
    params = [f"const {t} *restrict in{i}" for i, t in enumerate(in_types)]
    written = [i for i, pointer in enumerate(outputs) if pointer is not None]
    params += [f"{out_types[i]} *restrict out{i}" for i in written]
    floats = [_KEY_LOADS.get(a.aval.dtype.name) for a in eqn.inputs[:keys]]
    lines = ["#include <stdlib.h>",
             _comparator(name, in_types[:keys], floats, descending,
                         kept <= MAX_SELECTED and kept < n),
             f"static void {name}({', '.join(params)}) {{",
             f"  #pragma omp parallel num_threads({threads})",
             "  {",
             f"    int64_t *perm = malloc(sizeof(int64_t) * {2 * n});",
             "    #pragma omp for schedule(static)",
             f"    for (int64_t row = 0; row < {outer * inner}; row++) {{",
             f"      int64_t base = row / {inner} * {n * inner} + row % {inner};",
             f"      int64_t out_base = row / {inner} * {kept * inner} + row % {inner};",
             f"      const int64_t *order = {name}_order("
             + "".join(f"in{i} + base, " for i in range(keys)) + "perm);"]
    for i in (i for i in written if i < len(eqn.inputs)):
        lines.append(f"      for (int64_t j = 0; j < {kept}; j++) out{i}[out_base + j * {inner}]"
                     f" = in{i}[base + order[j] * {inner}];")
    index = len(eqn.inputs)
    if index in written:  # top_k's indices
        lines.append(f"      for (int64_t j = 0; j < {kept}; j++) out{index}[out_base + j * "
                     f"{inner}] = ({out_types[index]})order[j];")
    lines += ["    }", "    free(perm);", "  }", "}", ""]
    call = f"{name}({', '.join(inputs + [outputs[i] for i in written])});"
    text = "\n".join(lines)
    for placeholder, value in (("@N@", n), ("@S@", inner), ("@K@", kept), ("@RUN@", RUN)):
        text = text.replace(placeholder, str(value))
    return text, [call]


# How a float key is read for comparison (None: not a float): half precision is stored
# as 16-bit patterns and compared as float32, which holds every value exactly.
_KEY_LOADS = {"float32": "", "float64": "", "float16": "ember_f16_to_f32",
              "bfloat16": "ember_bf16_to_f32"}


def _comparator(name: str, types: list[str], floats: list[str | None], descending: bool,
                selects: bool) -> str:
    """``<name>_before(a, b)``: element ``a`` of the row goes strictly before ``b``; and
    ``<name>_order(keys..., scratch)``: the stable order of a row (in ``scratch``), its
    first ``@K@`` elements only when it ``selects``. ``floats``: each key's ``_KEY_LOADS``."""
    keys = ", ".join(f"const {t} *k{i}" for i, t in enumerate(types))
    tests = []
    for i, load in enumerate(floats):
        x, y = (f"{load or ''}(k{i}[{e} * @S@])" for e in ("a", "b"))
        first, second = (y, x) if descending else (x, y)
        tests.append(f"  if ({_less(first, second, load is not None)}) return 1;\n"
                     f"  if ({_less(second, first, load is not None)}) return 0;")
    args = ", ".join(f"k{i}" for i in range(len(types)))
    return f"""\
static inline int {name}_before({keys}, int64_t a, int64_t b) {{
{chr(10).join(tests)}
  return 0;
}}

static const int64_t *{name}_order({keys}, int64_t *perm) {{
{_select(name, args) if selects else _merge_sort(name, args)}
}}
"""


def _less(x: str, y: str, is_float: bool) -> str:
    """C: ``x < y``, a NaN the largest of floats (two NaNs are equal, as -0.0 and 0.0)."""
    if not is_float:
        return f"{x} < {y}"
    return f"{x} < {y} || ({y} != {y} && {x} == {x})"


def _merge_sort(name: str, args: str) -> str:
    """C: the stable order of a row: runs sorted by insertion, then merged bottom-up."""
    return f"""\
  int64_t *src = perm, *dst = perm + @N@;
  for (int64_t i = 0; i < @N@; i++) {{
    int64_t at = i;  /* insertion into the run of i: past the elements strictly after it */
    for (; at % @RUN@ && {name}_before({args}, i, src[at - 1]); at--) src[at] = src[at - 1];
    src[at] = i;
  }}
  for (int64_t width = @RUN@; width < @N@; width *= 2) {{
    for (int64_t lo = 0; lo < @N@; lo += 2 * width) {{
      int64_t mid = lo + width < @N@ ? lo + width : @N@;
      int64_t hi = lo + 2 * width < @N@ ? lo + 2 * width : @N@;
      int64_t i = lo, j = mid;
      for (int64_t t = lo; t < hi; t++)  /* the right run wins only when strictly before */
        dst[t] = j < hi && (i >= mid || {name}_before({args}, src[j], src[i])) ? src[j++]
                                                                          : src[i++];
    }}
    int64_t *swap = src; src = dst; dst = swap;
  }}
  return src;"""


def _select(name: str, args: str) -> str:
    """C: the first ``@K@`` of the stable order of a row, kept in order while scanning it
    (an element enters past every kept one it is not strictly before)."""
    return f"""\
  int64_t count = 0;
  for (int64_t i = 0; i < @N@; i++) {{
    if (count == @K@ && !{name}_before({args}, i, perm[@K@ - 1])) continue;
    int64_t at = count < @K@ ? count++ : @K@ - 1;
    for (; at > 0 && {name}_before({args}, i, perm[at - 1]); at--) perm[at] = perm[at - 1];
    perm[at] = i;
  }}
  return perm;"""
