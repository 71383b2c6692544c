"""The CPU backend's program cache: a compiled program found by its traced graph.

The compile cache keys a library by its C source, so a process that finds the library
on disk has still run the pass pipeline, fusion, lowering and code generation to learn
that source: tens of milliseconds, most of a warm start. This level is looked up first.
Its key is computed from what ``CpuBackend.compile`` is given (the graph's text without
source locations, its constants' values, the donated inputs) and from everything that
turns that into a library (the backend's settings and flags, the toolchain, the code of
Ember itself). Its entry, a small JSON file in the compile cache, describes the native
program: its library's key in the compile cache, the buffer layout, the constants and
the results. A hit loads the library and runs it.

Only programs that run entirely in native code are kept (no host calls between
segments), and only graphs that their text describes completely (``_keyable``).
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import functools
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ember.backends.cpu.executable import contiguous
from ember.compiler.c_module import Layout
from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.errors import EmberTypeError
from ember.ir.graph import Graph, Var, subgraphs
from ember.passes.memory import Location
from ember.runtime.compile_cache import default_cache, key_of

_FORMAT = "ember-cpu-program/1"  # bump when the entry's layout or meaning changes
_SUFFIX = ".json"
_MAX_HASHED_CONSTANT_BYTES = 16 << 20  # more: hashing would cost what the cache saves
_MAX_STORED_CONSTANT_BYTES = 1 << 20  # constants the passes made are stored in the entry
_MAX_ENTRY_BYTES = 8 << 20


@dataclass
class NativeProgram:
    """A library (by its key in the compile cache) and what ``CpuExecutable.configure``
    needs to run it."""

    library: str
    layout: Layout
    program: list[int]  # native segments in order
    constants: list[int | np.ndarray]  # index into the graph's constants, or a value
    output_avals: list[ShapedArray]
    results: list[tuple[str, Any]]  # ('literal', array) or ('buffer', (Location, Var))
    arena_bytes: int

    def configure_args(self, graph: Graph) -> dict[str, Any]:
        constants = [graph.constvals[c] if isinstance(c, int) else c for c in self.constants]
        return {"layout": self.layout, "program": self.program, "constants": constants,
                "output_avals": self.output_avals, "results": self.results,
                "arena_bytes": self.arena_bytes}


# --- the key ---------------------------------------------------------------------------

def program_key(graph: Graph, donated: Sequence[bool],
                settings: Sequence[str]) -> list[str] | None:
    """Key parts of ``graph``'s entry, or None when the graph cannot be keyed (a param
    without a faithful text form, or constants too large to hash on every start)."""
    if not _keyable(graph):
        return None
    constants = _constants_digest(graph)
    if constants is None:
        return None
    mask = "".join("1" if d else "0" for d in donated)
    return [_FORMAT, code_digest(), graph.pretty_print(source=False), constants, mask,
            *settings]


def _keyable(value: Any) -> bool:
    """Whether the printer writes ``value`` (a param, or a graph's params) completely:
    not functions or other objects (``<...>``), nor NumPy scalars (printed without
    their dtype)."""
    if isinstance(value, Graph):
        return all(_keyable(v) for eqn in value.eqns for v in eqn.params.values())
    if value is None or isinstance(value, (bool, int, float, complex, str, ShapedArray,
                                           np.dtype, enum.Enum)):
        return not isinstance(value, np.generic)
    if isinstance(value, np.ndarray):
        return value.dtype != object
    if isinstance(value, (tuple, list)):
        return all(_keyable(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return all(_keyable(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


def _constants_digest(graph: Graph) -> str | None:
    """sha256 of every constant's type and bytes, nested graphs' included (the printer
    writes only small constants' values, and the passes may fold any into the code)."""
    digest = hashlib.sha256()
    total = 0
    for value in _constants(graph):
        array = contiguous(value)
        total += array.nbytes
        if total > _MAX_HASHED_CONSTANT_BYTES or array.dtype == object:
            return None
        digest.update(f"{dtypes.short_name(array.dtype)}{array.shape}".encode())
        digest.update(array.reshape(-1).view(np.uint8))
    return digest.hexdigest()


def _constants(graph: Graph):
    yield from graph.constvals
    for eqn in graph.eqns:
        for nested in subgraphs(eqn.params):
            yield from _constants(nested)


@functools.cache
def code_digest() -> str:
    """Identity of the code that compiles, as this process imported it: every source
    file of the ember package (path, size, modification time), NumPy's version and
    Python's. Taken when this module is imported, next to the rest of the package;
    ``store`` writes nothing once the files have changed since (their entry would name
    code that this process is not running)."""
    return _scan_code()


def _scan_code() -> str:
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # ember/
    lines = [np.__version__, sys.version, root]
    _list_sources(root, "", lines)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _list_sources(folder: str, prefix: str, lines: list[str]) -> None:
    with os.scandir(folder) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if entry.name != "__pycache__":
                _list_sources(entry.path, f"{prefix}{entry.name}/", lines)
        elif entry.name.endswith((".py", ".c", ".h")):
            info = entry.stat()
            lines.append(f"{prefix}{entry.name}\0{info.st_size}\0{info.st_mtime_ns}")


# --- entries ---------------------------------------------------------------------------

def load(key_parts: list[str], graph: Graph) -> NativeProgram | None:
    """The program stored under ``key_parts``, or None (missing, or unusable: then the
    entry is discarded, to be written again)."""
    cache = default_cache()
    key = key_of(key_parts, _SUFFIX)
    path = cache.find(key, _SUFFIX)
    if path is None:
        return None
    try:
        if path.stat().st_size > _MAX_ENTRY_BYTES:
            raise ValueError("entry too large")
        return _decode(json.loads(path.read_text(encoding="utf-8")), graph)
    except (OSError, ValueError, KeyError, TypeError, IndexError, EmberTypeError,
            binascii.Error):
        cache.discard(key, _SUFFIX)
        return None


def store(key_parts: list[str], program: NativeProgram) -> None:
    if _scan_code() != code_digest():  # the sources changed while this process ran
        return
    text = json.dumps(_encode(program), separators=(",", ":"))
    default_cache().get_or_build(key_parts, _SUFFIX,
                                 lambda path: path.write_text(text, encoding="utf-8"))


def describe(library: Path, graph: Graph, *, layout: Layout, program: list,
             constants: Sequence[Any], output_avals: Sequence[ShapedArray],
             results: list[tuple[str, Any]], arena_bytes: int) -> NativeProgram | None:
    """The entry of a program compiled from ``graph`` into ``library`` (the arguments
    are those of ``CpuExecutable.configure``), or None when it cannot be kept: host
    calls, or large constants made by the passes."""
    if not all(isinstance(step, int) for step in program):
        return None
    refs: list[int | np.ndarray] = []
    stored = 0
    for value in constants:
        index = next((i for i, c in enumerate(graph.constvals) if c is value), None)
        if index is None:
            value = np.asarray(value)
            stored += value.nbytes
            if stored > _MAX_STORED_CONSTANT_BYTES or value.dtype == object:
                return None
        refs.append(value if index is None else index)
    return NativeProgram(library.stem, layout, list(program), refs, list(output_avals),
                         results, arena_bytes)


def _encode(program: NativeProgram) -> dict:
    return {
        "library": program.library,
        "layout": [program.layout.inputs, program.layout.outputs, program.layout.host],
        "program": program.program,
        "constants": [c if isinstance(c, int) else _array(c) for c in program.constants],
        "outputs": [_aval(a) for a in program.output_avals],
        "results": [{"literal": _array(value)} if kind == "literal" else
                    {"buffer": [value[0].kind, value[0].slot, value[0].offset],
                     "aval": _aval(value[1].aval)} for kind, value in program.results],
        "arena_bytes": program.arena_bytes,
    }


def _decode(data: dict, graph: Graph) -> NativeProgram:
    """The program an entry describes; raises ValueError (or KeyError, TypeError...) on
    anything inconsistent with ``graph``."""
    layout = tuple(_int(n) for n in data["layout"])
    constants = [_int(c) if isinstance(c, int) else _from_array(c) for c in data["constants"]]
    for c in constants:
        if isinstance(c, int) and not 0 <= c < len(graph.constvals):
            raise ValueError("constant index out of range")
    outputs = [_from_aval(a) for a in data["outputs"]]
    results = []
    for item in data["results"]:
        if "literal" in item:
            results.append(("literal", _from_array(item["literal"], read_only=True)))
            continue
        kind, slot, offset = item["buffer"]
        if kind not in ("input", "output", "arena"):
            raise ValueError(f"unexpected buffer kind {kind!r}")
        location = Location(kind, _int(slot), _int(offset))
        results.append(("buffer", (location, Var(_from_aval(item["aval"])))))
    if (len(layout) != 3 or layout[0] != len(graph.inputs) + len(constants)
            or layout[1] != len(outputs) or len(results) != len(graph.outputs)):
        raise ValueError("layout does not match the graph")
    program = [_int(step) for step in data["program"]]
    return NativeProgram(str(data["library"]), Layout(*layout), program, constants, outputs,
                         results, _int(data["arena_bytes"]))


def _int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a count, got {value!r}")
    return value


def _aval(aval: ShapedArray) -> dict:
    return {"shape": list(aval.shape), "dtype": dtypes.short_name(aval.dtype)}


def _from_aval(data: dict) -> ShapedArray:
    return ShapedArray(tuple(_int(d) for d in data["shape"]),
                       dtypes.from_short_name(data["dtype"]))


def _array(value: np.ndarray) -> dict:
    array = contiguous(value)
    return {**_aval(ShapedArray(array.shape, array.dtype)),
            "data": base64.b64encode(array.reshape(-1).view(np.uint8)).decode("ascii")}


def _from_array(data: dict, read_only: bool = False) -> np.ndarray:
    aval = _from_aval(data)
    raw = base64.b64decode(data["data"], validate=True)
    if len(raw) != aval.nbytes:
        raise ValueError("constant data does not match its type")
    array = np.frombuffer(raw, dtype=aval.dtype).reshape(aval.shape).copy()
    array.flags.writeable = not read_only
    return array


code_digest()  # now, as the package is imported (see its docstring)
