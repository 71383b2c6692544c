"""One C module per compiled graph: every kernel and GEMM call, plus the entry point.

    void run(void **b, int64_t segment);

``b[0]`` is the arena of temporaries, then come the program's inputs (arguments, then
constants), its outputs, and results of host calls. Host calls split the program into
native *segments*; without them there is a single segment 0, so a call of the compiled
function is a single Python → C crossing.

A large module is written as several translation units that the C compiler builds in
parallel, one per core, and links into one library: the steps are cut into contiguous
*parts* of about equal compile cost, each part a function of its unit
(``ember_part_<n>(b)``, hidden outside the library) that calls its kernels in order;
``run`` calls the parts of a segment one after the other.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ember.codegen.c_gemm import gemm_parts, render_gemm
from ember.compiler.steps import LoweredStep, call_name, kernel_info
from ember.codegen.c_sort import render_call
from ember.codegen.c import CRenderer
from ember.codegen.kernel_ir import Buffer, KernelInfo, base_shifts
from ember.ir.graph import Var
from ember.passes.memory import BufferPlan, Location

PRELUDE = """\
#include <stdint.h>
#include <string.h>
#include "ember_math.h"
#include "ember_kernels.h"
"""


@dataclass
class Layout:
    """Slot numbers of the pointer array ``b``."""

    inputs: int
    outputs: int
    host: int

    def slot(self, location: Location) -> int:
        base = {"input": 1, "output": 1 + self.inputs,
                "host": 1 + self.inputs + self.outputs}[location.kind]
        return base + location.slot

    @property
    def size(self) -> int:
        return 1 + self.inputs + self.outputs + self.host


@dataclass
class Module:
    units: list[str]  # translation units, linked into one library
    segments: list[list[int]]  # step indices of each native segment
    kernels: list[KernelInfo] = field(default_factory=list)
    uses_blas: bool = False


# The compile cost of a step, in characters of C: an OpenMP parallel region (outlined
# by the compiler) and an inlined vector math function cost as much as this many
# characters of plain loops. (gcc 12 -O3 runs about 47k instructions per unit of cost.)
_PARALLEL_REGION_COST = 600
_MATH_CALL_COST = 1000
# A unit of its own costs about 2000 more (the compiler's start and the headers), and a
# split module a link step of about 1600: units are at least this large.
MIN_UNIT_COST = 6000
# A unit that calls a float GEMM compiles ember_gemm.h's BLAS wrapper (its split over
# the team, its epilogues): 0.45 s of gcc 12 -O3, as much as this many characters of
# loops. Once per unit that calls one, so the GEMM steps share a unit. (Once the
# wrapper's own library is built, modules link it instead and the cost is not paid:
# the CPU backend passes 0, toolchain._with_gemm_wrapper.)
GEMM_WRAPPER_COST = 20000


def build_module(steps: list[LoweredStep], plan: BufferPlan, layout: Layout,
                 renderer: CRenderer, max_units: int = 1, hold_team: bool = False,
                 profile: bool = False, gemm_wrapper_cost: int = GEMM_WRAPPER_COST) -> Module:
    """The module of ``steps``, in at most ``max_units`` translation units.

    ``hold_team``: a call of a module with parallel work keeps its threads on distinct
    cores while it runs (include/ember_team.h). ``profile``: every step counts its calls
    and time (include/ember_profile.h; ``ember_profile_read``). ``gemm_wrapper_cost``:
    what compiling the GEMM wrapper adds to the unit of the GEMM steps (0 where the
    module links the wrapper's library)."""
    views = [_in_place_view(step, plan) for step in steps]
    rendered = [_render_step(step, plan, layout, renderer, view)
                for step, view in zip(steps, views)]
    definitions, calls, declarations = _share_kernels(
        steps, [definition for definition, _, _ in rendered], [call for _, _, call in rendered])
    if profile:
        calls = [_timed(index, call) for index, call in enumerate(calls)]
    infos = [replace(kernel_info(step, shown), kind="view") if view else kernel_info(step, shown)
             for step, view, (_, shown, _) in zip(steps, views, rendered)]
    segments = _segments(steps)
    uses_blas = any(s.gemm is not None for s in steps)
    parallel = any(_runs_parallel(step, text, renderer.threads)
                   for step, text in zip(steps, definitions))
    team = renderer.threads if hold_team and parallel else 0
    parts = _parts(segments, [_compile_cost(d, c) for d, c in zip(definitions, calls)],
                   max_units, {i for i, step in enumerate(steps) if step.gemm is not None},
                   gemm_wrapper_cost)
    if len({unit for unit, _ in parts}) <= 1:
        cases = _cases(segments, lambda segment: _calls(segment, calls, steps, "    "))
        entry = _run_function(cases, team)
        if profile:
            entry += _profile_counters(len(steps))
        units = [_unit_source(uses_blas, definitions, entry, team, profile)]
    else:
        units = _split_units(steps, segments, parts, definitions, calls, declarations, team,
                             profile)
    return Module(units, segments, infos, uses_blas)


_SHARED_QUALIFIER = '__attribute__((visibility("hidden"), noinline)) '


_LINE_COMMENT = re.compile(r"[ \t]*//[^\n]*")


def _share_kernels(steps: list[LoweredStep], definitions: list[str], calls: list[list[str]]
                   ) -> tuple[list[str], list[list[str]], dict[int, str]]:
    """Steps whose kernels render alike but for their names and comments (the user's
    lines each op came from: a model's blocks are the same code at different depths)
    call the first one's, which is compiled once: kept out of line and visible to the
    library's other units. Returns the definitions (empty where a step calls another's),
    the calls, and the declaration of the kernel each such step calls (for a unit that
    does not define it). (Each step's kernel as shown to the user keeps its own lines.)"""
    first: dict[str, int] = {}
    owner: dict[int, int] = {}
    for index, step in enumerate(steps):
        if step.kernel is not None and definitions[index]:
            alike = definitions[index].replace(f" {step.kernel.name}(", " @(", 1)
            owner[index] = first.setdefault(_LINE_COMMENT.sub("", alike), index)
    definitions, calls = list(definitions), [list(call) for call in calls]
    declarations: dict[int, str] = {}
    for index, shared in owner.items():
        if index == shared:
            continue
        if not definitions[shared].startswith(_SHARED_QUALIFIER):
            definitions[shared] = definitions[shared].replace("static ", _SHARED_QUALIFIER, 1)
        declarations[index] = definitions[shared].split(" {", 1)[0] + ";"
        definitions[index] = ""
        calls[index][-1] = calls[index][-1].replace(
            f"{steps[index].kernel.name}(", f"{steps[shared].kernel.name}(", 1)
    return definitions, calls, declarations


def _timed(index: int, call: list[str]) -> list[str]:
    """``call``'s statements, adding their time and one call to step ``index``'s counters."""
    if not call:
        return call
    return ["{", "  const double ember_started = ember_now();", *["  " + line for line in call],
            f"  ember_profile_seconds[{index}] += ember_now() - ember_started;",
            f"  ember_profile_calls[{index}] += 1;", "}"]


def _profile_counters(count: int) -> str:
    """The counters of ``count`` steps and ``ember_profile_read`` (in the unit of ``run``)."""
    size = max(count, 1)
    return "\n".join([
        f"__attribute__((visibility(\"hidden\"))) double ember_profile_seconds[{size}];",
        f"__attribute__((visibility(\"hidden\"))) int64_t ember_profile_calls[{size}];",
        "void ember_profile_read(double *seconds, int64_t *calls, int reset) {",
        f"  for (int i = 0; i < {count}; i++) {{",
        "    seconds[i] = ember_profile_seconds[i];",
        "    calls[i] = ember_profile_calls[i];",
        "    if (reset) { ember_profile_seconds[i] = 0; ember_profile_calls[i] = 0; }",
        "  }", "}", ""])


def _runs_parallel(step: LoweredStep, definition: str, threads: int) -> bool:
    """Whether the step starts OpenMP threads: a parallel loop or call, or a GEMM split."""
    if "#pragma omp parallel" in definition:
        return True
    return step.gemm is not None and gemm_parts(step.gemm, threads) > 1


def _compile_cost(definition: str, call: list[str]) -> int:
    text = definition + "\n".join(call)
    return (len(text) + _PARALLEL_REGION_COST * text.count("#pragma omp parallel")
            + _MATH_CALL_COST * len(re.findall(r"\bember_\w+f\(", text)))


def _parts(segments: list[list[int]], costs: list[int], max_units: int,
           gemms: set[int] = frozenset(),
           gemm_wrapper_cost: int = GEMM_WRAPPER_COST) -> list[tuple[int, list[int]]]:
    """(unit, step indices) of each part, in execution order: the native steps cut into
    units of about equal cost, at segment boundaries; the ``gemms`` steps all in unit 0
    (which pays ``gemm_wrapper_cost`` once), the others cut into contiguous runs."""
    native = [i for segment in segments for i in segment]
    gemms = gemms & set(native)
    wrapper = gemm_wrapper_cost if gemms else 0
    total = sum(costs[i] for i in native) + wrapper
    done = wrapper + sum(costs[i] for i in gemms)  # (unit 0's GEMM steps come first)
    # (a unit besides the GEMMs' must be worth its own compiler run)
    count = max(1, min(max_units, total // MIN_UNIT_COST,
                       1 + (total - done) // MIN_UNIT_COST if gemms else max_units))
    parts: list[tuple[int, list[int]]] = []
    for segment in segments:
        first = len(parts)
        for index in segment:
            unit = 0
            if index not in gemms:
                unit = min(count - 1, (done + costs[index] // 2) * count // max(total, 1))
                done += costs[index]
            if len(parts) == first or parts[-1][0] != unit:
                parts.append((unit, []))
            parts[-1][1].append(index)
    dense = {unit: number for number, unit in enumerate(sorted({u for u, _ in parts}))}
    return [(dense[unit], indices) for unit, indices in parts]


def _split_units(steps: list[LoweredStep], segments: list[list[int]],
                 parts: list[tuple[int, list[int]]], definitions: list[str],
                 calls: list[list[str]], declarations: dict[int, str], team: int,
                 profile: bool) -> list[str]:
    """One source per unit: the shared kernels it calls, its kernels and part functions;
    the last one holds ``run``."""
    last = max((unit for unit, _ in parts), default=0)
    units = []
    for unit in range(last + 1):
        mine = [(number, indices) for number, (owner, indices) in enumerate(parts)
                if owner == unit]
        body = list(dict.fromkeys(declarations[i] for _, indices in mine for i in indices
                                  if i in declarations))
        body += [definitions[i] for _, indices in mine for i in indices]
        body += [_part_function(number, indices, calls, steps) for number, indices in mine]
        entry = _dispatch(segments, parts, team) if unit == last else ""
        if profile and unit == last:
            entry += _profile_counters(len(steps))
        uses_blas = any(steps[i].gemm is not None for _, indices in mine for i in indices)
        units.append(_unit_source(uses_blas, body, entry, team if unit == last else 0,
                                  profile))
    return units


_PART_SIGNATURE = '__attribute__((visibility("hidden"))) void ember_part_{}(void **b)'


def _part_function(number: int, indices: list[int], calls: list[list[str]],
                   steps: list[LoweredStep]) -> str:
    lines = [_PART_SIGNATURE.format(number) + " {", "  char *arena = (char *)b[0];",
             "  (void)arena;", *_calls(indices, calls, steps, "  "), "}", ""]
    return "\n".join(lines)


def _dispatch(segments: list[list[int]], parts: list[tuple[int, list[int]]],
              team: int) -> str:
    """``run``: the parts of each segment in order (declared first)."""
    declarations = [f"{_PART_SIGNATURE.format(number)};" for number in range(len(parts))]
    cases = _cases(segments, lambda segment: [
        f"    ember_part_{part}(b);" for part, (_, indices) in enumerate(parts)
        if indices[0] in segment])
    return "\n".join(declarations) + "\n" + _run_function(cases, team)


def _run_function(cases: list[str], team: int) -> str:
    """``run`` switching over the segments' ``cases``; with a ``team`` (its thread
    count), holding the team on distinct cores around them."""
    lines = ["void run(void **b, int64_t segment) {", "  char *arena = (char *)b[0];",
             "  (void)arena;"]
    if team:
        lines.append(f"  ember_team team = ember_team_hold({team});")
    lines += ["  switch (segment) {", *cases, "  }"]
    if team:
        lines.append("  ember_team_release(&team);")
    return "\n".join(lines + ["}", ""])


def _unit_source(uses_blas: bool, definitions: list[str], entry: str, team: int = 0,
                 profile: bool = False) -> str:
    parts = ['#include "ember_profile.h"\n'] if profile else []  # first: _GNU_SOURCE
    if team:
        parts.append('#include "ember_team.h"\n')
    parts.append(PRELUDE)
    if uses_blas:
        parts.append('#include "ember_gemm.h"\n')
    parts += [text for text in definitions if text]
    parts.append(entry)
    return "\n".join(parts)


def _segments(steps: list[LoweredStep]) -> list[list[int]]:
    segments: list[list[int]] = [[]]
    for index, step in enumerate(steps):
        if step.host:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append(index)
    return [s for s in segments if s] or [[]]


def _cases(segments: list[list[int]], body: Callable[[list[int]], list[str]]) -> list[str]:
    """The ``case``s of ``run``: each segment's ``body``, then ``break``."""
    lines = []
    for number, segment in enumerate(segments):
        lines += [f"  case {number}:", *body(segment), "    break;"]
    return lines


def _calls(indices: list[int], calls: list[list[str]], steps: list[LoweredStep],
           pad: str) -> list[str]:
    """The calls of the steps at ``indices``, each after a comment naming its group."""
    lines = []
    for index in indices:
        lines.append(f"{pad}/* {steps[index].group.name} */")
        lines += [pad + line for line in calls[index]]
    return lines


def _pointer(var: Var, plan: BufferPlan, layout: Layout, ctype: str) -> str:
    location = plan.locations[var]
    if location.kind == "arena":
        return f"({ctype} *)(arena + {location.offset})"
    return f"({ctype} *)b[{layout.slot(location)}]"


def _render_step(step: LoweredStep, plan: BufferPlan, layout: Layout, renderer: CRenderer,
                 view: bool) -> tuple[str, str, list[str]]:
    """(kernel definition, the source shown for it, statements of its call); ``view``: the
    step's results are in their buffers already (``_in_place_view``)."""
    if step.host:
        return "", f"host call: {step.group.host.prim.name} (NumPy reference)", []
    if step.call is not None:
        definition, call = _native_call(step, plan, layout, renderer)
        return definition, definition, call
    if view:
        return "", "a reshape of a value written into its output's memory: no copy", []
    definition, call = "", []
    shown = []
    if step.gemm is not None:
        gemm = _gemm_call(step, plan, layout, renderer)
        call += gemm
        shown.append("\n".join(gemm))
    if step.kernel is not None:
        aliases, args, shifts = _kernel_arguments(step, plan, layout, renderer)
        definition = renderer.render_kernel(step.kernel, aliases, shifts)
        call.append(f"{step.kernel.name}({', '.join(args)});")
        shown.append(definition)
    return definition, "\n".join(shown), call


def _in_place_view(step: LoweredStep, plan: BufferPlan) -> bool:
    """Whether the step's results are in their buffers already (``BufferPlan.views``)."""
    writes = step.group.writes()
    return bool(writes) and all(v in plan.views for v in writes)


def _kernel_arguments(step: LoweredStep, plan: BufferPlan, layout: Layout, renderer: CRenderer
                      ) -> tuple[dict[Buffer, Buffer], list[str], dict[Buffer, int]]:
    """Call arguments (one per distinct memory), the parameters that alias another, and
    how far each argument's pointer is advanced (``base_shifts``)."""
    var_of = {buf: var for var, buf in step.bindings.items()}
    first_at: dict[Location, Buffer] = {}
    aliases: dict[Buffer, Buffer] = {}
    for buf in step.kernel.params:
        location = plan.locations[var_of[buf]]
        if location in first_at:
            aliases[buf] = first_at[location]
        else:
            first_at[location] = buf
    shifts = base_shifts(step.kernel, aliases)
    args = []
    for buf in first_at.values():
        pointer = _pointer(var_of[buf], plan, layout, renderer.storage_types[buf.dtype.name])
        args.append(f"{pointer} + {shifts[buf]}" if buf in shifts else pointer)
    return aliases, args, shifts


def _gemm_call(step: LoweredStep, plan: BufferPlan, layout: Layout,
               renderer: CRenderer) -> list[str]:
    gemm = step.gemm
    ctype = renderer.storage_types[gemm.dtype.name]
    a, b = (_pointer(var, plan, layout, renderer.storage_types[var.aval.dtype.name])
            for var in step.gemm_operands)  # (float32 where a cast is fused: GemmPlan.casts)
    c = _pointer(step.product, plan, layout, ctype)
    affine = step.affine
    if affine is None:
        return render_gemm(gemm, a, b, c, ctype, renderer.threads)
    d = "0" if affine.addend is None else _pointer(affine.addend, plan, layout, ctype)
    row = "0" if affine.row is None else _pointer(affine.row, plan, layout, ctype)
    e = _pointer(affine.result, plan, layout, ctype) if affine.keeps_product else "0"
    return render_gemm(gemm, a, b, c, ctype, renderer.threads, affine.alpha, d, affine.beta,
                       row, affine.row_scale, affine.activation, e)


def _native_call(step: LoweredStep, plan: BufferPlan, layout: Layout,
                 renderer: CRenderer) -> tuple[str, list[str]]:
    """A sort or top_k as a C function of the module (``sort_call``)."""
    eqn = step.call
    types = renderer.storage_types
    inputs = [_pointer(a, plan, layout, types[a.aval.dtype.name]) for a in eqn.inputs]
    outputs = [_pointer(v, plan, layout, types[v.aval.dtype.name]) if v in plan.locations
               else None for v in eqn.outputs]  # (an unused result has no buffer)
    return render_call(eqn, call_name(step), inputs, outputs, types, renderer.threads)
