"""The renderer: kernel IR → source text of a C-family language, driven by tables.

``Renderer`` holds all the logic (walking statements, naming temporaries, composing
expressions, accumulators); a target is a subclass that fills in tables and a few
one-line hooks. See ``ember/codegen/__init__.py`` for the contract.
"""
from __future__ import annotations

import copy

import math
import string
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ember.codegen import indexing as ix
from ember.codegen.indexing import Affine
from ember.codegen.kernel_ir import (AccFinish, AccInit, Accumulator, AccUpdate, AccValue, Barrier,
                                     Buffer, Const, IndexCond, IndexValue, Kernel, Let, Load, Loop,
                                     Node, Op, RunningValue, Scratch, Stmt, Store)
from ember.ops.elementwise import ELEMENTWISE_OPS


class OpTemplates(Mapping):
    """op -> template for one target language, read from each op's row in
    ``ember.ops.elementwise`` at lookup (so an op defined later renders too).
    ``targets``: the row keys to try, most specific first (CUDA: cuda, gpu, c);
    ``extra``: rows of the renderer's own (variants such as round's half-to-even)."""

    def __init__(self, targets: tuple[str, ...], extra: Mapping[str, Any] | None = None) -> None:
        self.targets = targets
        self.extra = dict(extra or {})

    def __getitem__(self, op: str) -> Any:
        if op in self.extra:
            return self.extra[op]
        row = ELEMENTWISE_OPS.get(op)
        template = row.template(self.targets) if row is not None else None
        if template is None:
            raise KeyError(op)
        return template

    def __iter__(self) -> Iterator[str]:
        yield from self.extra
        yield from (op for op, row in ELEMENTWISE_OPS.items()
                    if op not in self.extra and row.template(self.targets) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Fields(dict):
    """Template fields; ``f_<name>`` (a math function for the dtype) is made on demand."""

    def __init__(self, renderer: "Renderer", dtype: np.dtype, **fields: Any) -> None:
        super().__init__(fields)
        self.renderer = renderer
        self.dtype = dtype

    def __missing__(self, key: str) -> str:
        if not key.startswith("f_") or dtype_class(self.dtype) != "float":
            raise KeyError(key)
        return self.renderer.math_function(key[2:], self.dtype)


_FORMATTER = string.Formatter()
# accumulator kind -> the C operator that combines two values (max and min compare)
C_OPERATORS = {"sum": "+", "prod": "*", "and": "&", "or": "|", "xor": "^"}


def dtype_class(dtype: np.dtype) -> str:
    """'float', 'int' (signed), 'uint' or 'bool': which template row applies."""
    return "bool" if dtype == np.bool_ else {"i": "int", "u": "uint"}.get(dtype.kind, "float")


class Renderer:
    """Table-driven kernel renderer (subclasses: C, CUDA C, OpenCL C)."""

    # --- tables a target fills in -------------------------------------------------------
    storage_types: Mapping[str, str] = {}  # dtype name -> type of buffer elements
    compute_types: Mapping[str, str] = {}  # dtype name -> type of temporaries
    # op -> template, or {dtype name or class: template}; {0}, {1} are operands, {T} the compute
    # type, {U} the unsigned type of the same width, {BITS} the width, {f_<name>} a
    # math function for the dtype, {MIN} / {MAX} the dtype's limits.
    op_templates: Mapping[str, Any] = {}
    conversions: Mapping[tuple[str, str], str] = {}  # (from class, to class) -> template
    load_templates: Mapping[str, str] = {}  # dtype name -> template of a load ({0}: ref)
    store_templates: Mapping[str, str] = {}  # dtype name -> template of a stored value
    # float dtype name -> (its value as the unsigned integer of its bits, the inverse);
    # half precision needs none: its storage templates convert to and from its bits.
    float_bits: Mapping[str, tuple[str, str]] = {}
    index_type = "int64_t"
    indent_unit = "  "

    # --- hooks a target implements ----------------------------------------------------
    def kernel_header(self, kernel: Kernel, params: list[tuple[Buffer, bool]]) -> str:
        raise NotImplementedError

    def loop_header(self, loop: Loop) -> list[str]:
        raise NotImplementedError

    def math_function(self, name: str, dtype: np.dtype) -> str:
        raise NotImplementedError

    def float_literal(self, value: float, dtype: np.dtype) -> str:
        raise NotImplementedError

    # --- rendering ----------------------------------------------------------------------
    def render_kernel(self, kernel: Kernel, aliases: Mapping[Buffer, Buffer] | None = None,
                      shifts: Mapping[Buffer, int] | None = None) -> str:
        """Source of ``kernel``. ``aliases`` maps a parameter to another one that holds
        the same memory (an in-place update): only the target becomes a parameter.
        ``shifts``: parameters whose caller passes the pointer advanced by this many
        elements (``base_shifts``); their positions are rendered that much lower.

        The renderer itself keeps nothing of a call: each renders with a copy of it,
        which holds that kernel's names (and a GPU target's loop mapping)."""
        return copy.copy(self).render_body(kernel, aliases or {}, shifts or {})

    def render_body(self, kernel: Kernel, aliases: Mapping[Buffer, Buffer],
                    shifts: Mapping[Buffer, int] | None = None) -> str:
        """``render_kernel`` on the call's own copy of the renderer."""
        self.names: dict[int, str] = {}
        self.shifts = shifts or {}
        written = {b for b in kernel.params if b.written}
        written |= {aliases[b] for b in written if b in aliases}
        params = [(b, b in written) for b in kernel.params if b not in aliases]
        lines = [self.kernel_header(kernel, params) + " {"]
        for buffer, target in aliases.items():
            lines.append(self.indent_unit + self.alias_line(buffer, target))
        lines += self.block(kernel.body, 1)
        lines.append("}")
        return "\n".join(lines)

    def alias_line(self, buffer: Buffer, target: Buffer) -> str:
        ctype = self.storage_types[buffer.dtype.name]
        return f"{ctype} *{buffer.name} = ({ctype} *){target.name};"

    def block(self, stmts: list[Stmt], depth: int) -> list[str]:
        pad = self.indent_unit * depth
        lines: list[str] = []
        for stmt in stmts:
            if isinstance(stmt, Loop):
                lines += self.loop_lines(stmt, depth)
            else:
                lines += [pad + text for text in self.statement(stmt)]
        return lines

    def loop_lines(self, loop: Loop, depth: int) -> list[str]:
        """A whole loop: header, body, closing brace. GPU targets override it to map a
        loop (or a perfect nest of loops) onto threads."""
        pad = self.indent_unit * depth
        return [*(pad + text for text in self.loop_header(loop)),
                *self.block(loop.body, depth + 1), pad + "}"]

    def statement(self, stmt: Stmt) -> list[str]:
        if isinstance(stmt, Let):
            return [self.let(stmt.node, stmt.value)]
        if isinstance(stmt, Scratch):
            return [self.scratch_declaration(stmt.buffer)]
        if isinstance(stmt, Store):
            return [self.store(stmt)]
        if isinstance(stmt, Barrier):
            return ["/* barrier: the statements above are done */"]
        if isinstance(stmt, AccInit):
            return self.acc_init(stmt.acc)
        if isinstance(stmt, AccUpdate):
            return self.acc_update(stmt.acc, self.ref(stmt.value), stmt.position)
        if isinstance(stmt, AccFinish):
            return self.acc_finish(stmt.acc)
        raise TypeError(f"unknown statement {stmt!r}")

    def store(self, stmt: Store) -> str:
        target = self.element(stmt.buffer, stmt.index, stmt.offset)
        if stmt.buffer.scratch:
            text = f"{target} = {self.ref(stmt.value)};"
        elif stmt.combine is None:
            text = f"{target} = {self.stored(stmt.value, stmt.buffer.dtype)};"
        else:  # read, combine in the compute type, store
            dtype = stmt.buffer.dtype
            old = self.load_templates.get(dtype.name, "{0}").format(target)
            new = self.apply(stmt.combine, [old, self.ref(stmt.value)], dtype)
            text = f"{target} = {self.store_templates.get(dtype.name, '{0}').format(new)};"
        if stmt.guard is not None:
            text = f"if ({self.ref(stmt.guard)}) {text}"
        return text

    def element(self, buffer: Buffer, index: Affine, offset: Node | None) -> str:
        """The element of ``buffer`` at ``index + offset``."""
        shift = self.shifts.get(buffer, 0) if self.shifts else 0
        if shift:
            index = Affine(index.terms, index.const - shift)
        return f"{buffer.name}[{self.position(index, offset)}]"

    def position(self, index: Affine, offset: Node | None) -> str:
        """A buffer position: the affine index plus a data-dependent offset, if any."""
        if offset is None:
            return self.index(index)
        if not index.terms and not index.const:
            return self.ref(offset)
        return f"{self.index(index)} + {self.ref(offset)}"

    # values
    def scratch_declaration(self, buffer: Buffer) -> str:
        return f"{self.ctype(buffer.dtype)} {buffer.name}[{max(buffer.size, 1)}];"

    def let(self, node: Node, value: Node | None = None) -> str:
        name = f"t{node.id}"
        text = f"{self.ctype(node.dtype)} {name} = {self.expression(value or node)};"
        self.names[node.id] = name
        if isinstance(node, Op) and node.source:
            text += f"  // {node.op} at {_clean(node.source)}"
        return text

    def ref(self, node: Node) -> str:
        if isinstance(node, Const):
            return self.constant(node.value, node.dtype)
        return self.names[node.id]

    def ctype(self, dtype: np.dtype) -> str:
        return self.compute_types[dtype.name]

    def expression(self, node: Node) -> str:
        if isinstance(node, Load):
            ref = self.element(node.buffer, node.index, node.offset)
            if node.buffer.scratch:
                return ref
            value = self.load_templates.get(node.dtype.name, "{0}").format(ref)
            if node.guard is not None:
                value = f"({self.ref(node.guard)} ? {value} : 0)"
            return value
        if isinstance(node, IndexValue):
            return f"({self.ctype(node.dtype)})({self.index(node.index)})"
        if isinstance(node, IndexCond):
            return self.index_condition(node)
        if isinstance(node, AccValue):
            return node.acc.name
        if isinstance(node, RunningValue):
            acc = node.acc
            if self.tracks_nan(acc):
                return f"({acc.name}_nan ? {self.float_literal(math.nan, acc.dtype)} : {acc.name})"
            return acc.name
        if isinstance(node, Op):
            return self.operation(node)
        raise TypeError(f"cannot render {node!r}")

    def index_condition(self, node: IndexCond) -> str:
        index = f"({self.index(node.index)})"
        parts = [f"{index} >= {node.lo}", f"{index} <= {node.hi}"]
        if node.step > 1:
            parts.append(f"({index} - {node.lo}) % {node.step} == 0")
        return "(" + " && ".join(parts) + ")"

    def stored(self, node: Node, dtype: np.dtype) -> str:
        return self.store_templates.get(dtype.name, "{0}").format(self.ref(node))

    def index(self, form: Affine) -> str:
        return render_index(form)

    def constant(self, value: Any, dtype: np.dtype) -> str:
        cls = dtype_class(dtype)
        if cls == "bool":
            return "1" if value else "0"
        if cls == "float":
            return self.float_literal(float(value), dtype)
        suffix = "ULL" if cls == "uint" else "LL"
        if cls == "int" and value == np.iinfo(dtype).min:
            return f"(({self.ctype(dtype)})({value + 1}{suffix} - 1))"
        return f"(({self.ctype(dtype)}){value}{suffix})"

    # operations
    def template_fields(self, dtype: np.dtype, **extra: Any) -> dict[str, Any]:
        fields = _Fields(self, dtype, T=self.ctype(dtype), BITS=dtype.itemsize * 8, **extra)
        if dtype_class(dtype) in ("int", "uint"):
            fields["U"] = self.compute_types[f"uint{dtype.itemsize * 8}"]
            info = np.iinfo(dtype)
            fields["MIN"] = self.constant(info.min, dtype)
            fields["MAX"] = self.constant(info.max, dtype)
        return fields

    def lookup(self, table: Mapping[str, Any], key: str, dtype: np.dtype) -> str:
        """A template row: by dtype name, else by dtype class, else 'any'."""
        entry = table[key]
        if isinstance(entry, str):
            return entry
        return entry.get(dtype.name) or entry.get(dtype_class(dtype)) or entry["any"]

    def operation(self, node: Op) -> str:
        args = [self.ref(a) for a in node.args]
        operand_dtype = node.args[0].dtype if node.args else node.dtype
        if node.op == "convert_element_type":
            return self.conversion(args[0], node.args[0].dtype, node.dtype)
        if node.op == "bitcast_convert_type":
            return self.from_bits(self.to_bits(args[0], node.args[0].dtype), node.dtype)
        if node.op == "select_n":
            return self.select(args, node.args[0].dtype == np.bool_)
        if node.op == "clamp":
            low = self.apply("max", [args[1], args[0]], node.dtype)
            return self.apply("min", [low, args[2]], node.dtype)
        if node.op == "integer_pow":
            return self.integer_power(args[0], node.param, node.dtype)
        if node.op == "round":
            return self.apply("round" if node.param == 0 else "round_even", args, node.dtype)
        return self.apply(node.op, args, operand_dtype)

    def apply(self, op: str, args: list[str], dtype: np.dtype) -> str:
        template = self.lookup(self.op_templates, op, dtype)
        return _FORMATTER.vformat(template, args, self.template_fields(dtype))

    def supports(self, op: str, dtype: np.dtype) -> bool:
        """Whether ``op`` on operands of ``dtype`` has a row in the tables."""
        if dtype.name not in self.compute_types:
            return False
        if op in ("convert_element_type", "bitcast_convert_type", "select_n", "clamp",
                  "integer_pow"):
            return True
        entry = self.op_templates.get(op)
        return entry is not None and (isinstance(entry, str) or any(
            k in entry for k in (dtype.name, dtype_class(dtype), "any")))

    def conversion(self, value: str, source: np.dtype, target: np.dtype) -> str:
        key = (dtype_class(source), dtype_class(target))
        template = self.conversions.get(key, "(({T}){0})")
        text = _FORMATTER.vformat(template, [value],
                                  self.template_fields(target, S=self.ctype(source)))
        rounding = self.store_templates.get(target.name)
        if rounding and source.name != target.name and dtype_class(target) == "float":
            return self.round_to_storage(text, target)
        return text

    def to_bits(self, value: str, dtype: np.dtype) -> str:
        """``value`` (of equal-width ``dtype``) as the unsigned integer of its bits."""
        if dtype_class(dtype) != "float":
            return f"(({self.compute_types[f'uint{dtype.itemsize * 8}']}){value})"
        if dtype.name in self.float_bits:
            return self.float_bits[dtype.name][0].format(value)
        return self.store_templates[dtype.name].format(value)

    def from_bits(self, bits: str, dtype: np.dtype) -> str:
        """The ``dtype`` value whose bits are the unsigned integer ``bits``."""
        if dtype_class(dtype) != "float":
            return f"(({self.ctype(dtype)}){bits})"
        if dtype.name in self.float_bits:
            return self.float_bits[dtype.name][1].format(bits)
        return self.load_templates[dtype.name].format(bits)

    def round_to_storage(self, value: str, dtype: np.dtype) -> str:
        """A value held in a wider type, rounded to what ``dtype`` can hold."""
        stored = self.store_templates[dtype.name].format(value)
        return self.load_templates[dtype.name].format(stored)

    def select(self, args: list[str], boolean: bool) -> str:
        """``cases[which]``; an integer ``which`` is clamped into range, as the reference."""
        which, cases = args[0], args[1:]
        text = cases[-1]
        for position in range(len(cases) - 2, -1, -1):
            if boolean:
                test = f"!({which})"
            else:
                test = f"{which} <= 0" if position == 0 else f"{which} == {position}"
            text = f"({test} ? {cases[position]} : {text})"
        return text

    def integer_power(self, value: str, exponent: int, dtype: np.dtype) -> str:
        if exponent == 0:
            return self.constant(1, dtype)
        product = _power_expression(value, abs(exponent))
        if exponent < 0:
            return f"(({self.ctype(dtype)})1 / {product})"
        return product

    # accumulators
    def acc_init(self, acc: Accumulator) -> list[str]:
        return [f"{ctype} {name} = {identity};" for name, ctype, identity in self.components(acc)]

    def components(self, acc: Accumulator) -> list[tuple[str, str, str]]:
        """(variable, type, identity) of each part of an accumulator's state: the value,
        argmax's index, whether a NaN was seen."""
        parts = [(acc.name + self.value_suffix(acc), self.ctype(acc.dtype),
                  self.reduction_identity(acc))]
        if acc.kind in ("argmax", "argmin"):
            parts.append((acc.name, self.ctype(acc.index_dtype), "0"))
        if self.tracks_nan(acc):
            parts.append((f"{acc.name}_nan", "int", "0"))
        return parts

    def reduction_identity(self, acc: Accumulator) -> str:
        return self.constant(acc.identity(), acc.dtype)

    def value_suffix(self, acc: Accumulator) -> str:
        return "_v" if acc.kind in ("argmax", "argmin") else ""

    def tracks_nan(self, acc: Accumulator) -> bool:
        return acc.kind in ("max", "min") and dtype_class(acc.dtype) == "float"

    def acc_update(self, acc: Accumulator, value: str, position: Affine | None) -> list[str]:
        name = acc.name
        if acc.kind in C_OPERATORS:
            return [f"{name} {C_OPERATORS[acc.kind]}= {value};"]
        if acc.kind in ("max", "min"):
            better = ">" if acc.kind == "max" else "<"
            lines = [f"{name} = {value} {better} {name} ? {value} : {name};"]
            if self.tracks_nan(acc):
                lines.append(f"{name}_nan |= {value} != {value};")
            return lines
        better = ">" if acc.kind == "argmax" else "<"
        nan = f" || ({value} != {value} && {name}_v == {name}_v)" \
            if dtype_class(acc.value_dtype) == "float" else ""
        return [(f"if ({value} {better} {name}_v{nan}) {{ {name}_v = {value}; "
                 f"{name} = {self.index(position)}; }}")]

    def acc_finish(self, acc: Accumulator) -> list[str]:
        if self.tracks_nan(acc):
            return [f"if ({acc.name}_nan) {acc.name} = {self.float_literal(math.nan, acc.dtype)};"]
        return []


def render_index(form: Affine) -> str:
    parts = []
    for atom, coef in form.terms:
        text = _atom_text(atom)
        parts.append(text if coef == 1 else f"{coef} * {text}" if coef > 0 else
                     f"({coef}) * {text}")
    if form.const or not parts:
        parts.append(str(form.const))
    return " + ".join(parts)


def _atom_text(atom) -> str:
    if isinstance(atom, ix.Sym):
        return atom.name
    op = "/" if isinstance(atom, ix.FloorDiv) else "%"
    return f"(({render_index(atom.arg)}) {op} {atom.divisor})"


def _power_expression(value: str, exponent: int) -> str:
    """``value ** exponent`` by repeated squaring, as one expression."""
    if exponent == 1:
        return value
    half = _power_expression(value, exponent // 2)
    square = f"({half} * {half})"
    return f"({square} * {value})" if exponent % 2 else square


def _clean(text: str) -> str:
    return text.replace("\n", " ").replace("*/", "* /")
