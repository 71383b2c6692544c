"""The native toolchain of the CPU backend: find a C compiler, compile C to a shared
object through the persistent compile cache, and load it with ctypes.

Generated kernels include ``ember_math.h`` (vectorizable float32 math) from the
``include`` folder next to this module, and may link the BLAS of the
``scipy-openblas32`` wheel.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import site
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ember.config import config
from ember.errors import BackendUnavailableError, CompileError
from ember.runtime.compile_cache import default_cache, hash_key, key_of, safe_file_name

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
"""Headers passed to every compile with ``-I`` (``ember_math.h``)."""

_CANDIDATE_COMPILERS = ("cc", "gcc", "clang")
# A function called without a declaration is an error, not a guessed prototype (the
# bundled headers declare what generated code calls: ember_libm.h, ember_blas.h).
_BASE_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=c11",
               "-fno-math-errno", "-fno-trapping-math", "-Werror=implicit-function-declaration")
_LINK_FLAGS = ("-lm",)
_CACHE_FORMAT = "ember-cc/1"  # bump when the way we call the compiler changes
_MAX_ERROR_LINES = 60
_TARGET_VALUE_OPTIONS = ("--param", "-target-cpu", "-target-feature")
_MAX_ERROR_CHARS = 6000


@dataclass(frozen=True)
class Toolchain:
    """A C compiler and the flags every Ember kernel is built with."""

    cc: str
    version: str
    target_isa: str
    openmp: bool
    base_flags: tuple[str, ...]


@dataclass(frozen=True)
class BlasInfo:
    """How to compile against and link a BLAS: OpenBLAS from the ``scipy-openblas32``
    wheel, or the sequential layer of Intel MKL from the ``mkl`` wheel."""

    name: str  # "openblas" or "mkl"
    lib_dir: str
    compile_flags: tuple[str, ...]  # what selects it in include/ember_blas.h
    link_flags: tuple[str, ...]
    version: str
    # Whether Ember's GEMM library is linked too, for what a BLAS lacks: products of
    # bfloat16 or float16 operands (ember_gemm_bf16/f16 in include/ember_gemm.h).
    half: bool = False


def find_toolchain() -> Toolchain | None:
    """The C compiler from ``$CC``, else ``cc``, ``gcc`` or ``clang`` on PATH; None if none.

    Probing runs once per compiler, and its answers are kept in the compile cache
    directory for later processes (``_probe``); the flags follow ``config.sanitize`` and
    ``config.cflags`` as they are at the time of the call. (A library built with
    ``sanitize="address"`` loads into Python only with the ASan runtime preloaded:
    ``LD_PRELOAD=$(cc -print-file-name=libasan.so)``.)
    """
    return _toolchain_for(os.environ.get("CC"), config.sanitize, config.cflags)


@functools.lru_cache(maxsize=None)
def _toolchain_for(cc_env: str | None, sanitize: str, cflags: str) -> Toolchain | None:
    cc = _locate_compiler(cc_env)
    if cc is None:
        return None
    version, target_isa, openmp = _probe(cc)
    flags = list(_BASE_FLAGS)
    if openmp:
        flags.append("-fopenmp")
    if sanitize:
        flags += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-O1"]
    flags += shlex.split(cflags)
    return Toolchain(cc=cc, version=version, target_isa=target_isa, openmp=openmp,
                     base_flags=tuple(flags))


def _locate_compiler(cc_env: str | None) -> str | None:
    if cc_env:
        found = shutil.which(cc_env)
        if found:
            return found
        warnings.warn(f"ember: $CC={cc_env!r} was not found; looking for cc, gcc or clang instead",
                      RuntimeWarning, stacklevel=4)
    for name in _CANDIDATE_COMPILERS:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class ProbeStats:
    """What a probe whose answers the compile cache keeps (the compiler's, the BLAS
    choice's) did in this process: probes run, and disk entries used."""

    runs: int = 0
    disk_hits: int = 0


probe_stats = ProbeStats()

_PROBE_FORMAT = "ember-probe/2"  # bump when _run_probes or the entry layout changes
_PROBE_SUFFIX = ".probe"  # (JSON entries of the compile cache)
# Environment variables that change what the compiler driver finds (headers, libraries,
# its own sub-programs), and so the OpenMP probe's answer.
_PROBE_ENV = ("COMPILER_PATH", "GCC_EXEC_PREFIX", "CPATH", "C_INCLUDE_PATH",
              "LIBRARY_PATH", "LD_LIBRARY_PATH")
_CPU_KEYS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
             "Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part",
             "CPU revision", "isa", "uarch")


@functools.lru_cache(maxsize=None)
def _probe(cc: str) -> tuple[str, str, bool]:
    """(first line of --version, target ISA identity, whether -fopenmp works).

    Running the compiler costs tens of milliseconds per process, so the answer is also
    kept on disk, in the compile cache, keyed by what determines it (see ``_probe_key``);
    an entry that does not check out is discarded and probed again.
    """
    key = _probe_key(cc)
    if key is None:
        return _run_probes(cc)
    answer, stored = default_cache().answer([key], _PROBE_SUFFIX, lambda: _run_probes(cc),
                                            _is_probe_answer)
    if stored:
        probe_stats.disk_hits += 1
    return tuple(answer)  # (a stored answer is a JSON list)


def _is_probe_answer(stored: Any) -> bool:
    return (isinstance(stored, list) and len(stored) == 3 and isinstance(stored[0], str)
            and isinstance(stored[1], str) and isinstance(stored[2], bool))


def _run_probes(cc: str) -> tuple[str, str, bool]:
    probe_stats.runs += 1
    version_lines = _run([cc, "--version"]).stdout.splitlines()
    version = version_lines[0].strip() if version_lines else "unknown"
    return version, _target_isa(cc), _supports_openmp(cc)


def cpu_flags() -> frozenset[str]:
    """The first processor's feature flags (``flags`` or ``Features`` in /proc/cpuinfo)."""
    for line in (_cpu_identity() or "").splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@functools.cache
def _cpu_identity() -> str | None:
    """The first processor's model and feature lines of /proc/cpuinfo; None if unreadable.
    (Read once: the kernel samples the CPU's clock for it, milliseconds on a busy VM.)"""
    lines = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                if not line.strip():
                    if lines:
                        break
                    continue
                name = line.split(":", 1)[0].strip()
                if name in _CPU_KEYS:
                    lines.append(" ".join(line.split()))
    except OSError:
        return None
    return "\n".join(lines) if lines else None


def _probe_key(cc: str) -> str | None:
    """Hash of what decides the probes' answers, or None when it can't be known (no cache).

    The compiler's resolved path, size and mtime (an upgrade changes them), the CPU's
    model and feature flags (``-march=native``), the environment the driver reads, and
    the Python-side probe format.
    """
    cpu = _cpu_identity()
    if cpu is None:
        return None
    try:
        real = os.path.realpath(cc)
        info = os.stat(real)
    except OSError:
        return None
    parts = [_PROBE_FORMAT, cc, real, str(info.st_size), str(info.st_mtime_ns), cpu,
             *(f"{name}={os.environ.get(name, '')}" for name in _PROBE_ENV)]
    return hash_key(parts)


def _run(command: Sequence[str], cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, cwd=cwd, check=False)


def _target_isa(cc: str) -> str:
    """Identify the code ``-march=native`` produces: triple, CPU name, hash of features.

    ``cc -march=native -###`` shows what the driver expands ``native`` to (gcc: the
    resolved ``-march=`` plus every ``-m<feature>`` and cache ``--param``; clang:
    ``-target-cpu`` and ``-target-feature``), so the identity changes with the CPU.
    """
    triple = _run([cc, "-dumpmachine"]).stdout.strip() or "unknown-triple"
    expansion = _run([cc, "-march=native", "-###", "-x", "c", "-c", "-o", os.devnull, os.devnull])
    tokens = _native_tokens(expansion.stderr)
    cpu = "unknown-cpu"
    for index, token in enumerate(tokens):
        if token.startswith("-march="):
            cpu = token.split("=", 1)[1]
        elif token == "-target-cpu" and index + 1 < len(tokens):
            cpu = tokens[index + 1]
    features = hashlib.sha256("\0".join(tokens).encode()).hexdigest()[:16]
    return f"{triple} {cpu} features:{features}"


def _native_tokens(driver_output: str) -> list[str]:
    """The target-describing arguments the driver passes to the compiler proper (cc1)."""
    for line in driver_output.splitlines():
        if "cc1" in line:
            try:
                words = shlex.split(line)
            except ValueError:
                words = line.split()
            return [word for index, word in enumerate(words)
                    if word.startswith(("-m", "--param", "-target-"))
                    or (index > 0 and words[index - 1] in _TARGET_VALUE_OPTIONS)]
    return []


def _supports_openmp(cc: str) -> bool:
    """Whether ``cc -fopenmp`` compiles and links a small program that uses the runtime."""
    program = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"
    with tempfile.TemporaryDirectory(prefix="ember-omp-probe-") as folder:
        source = Path(folder) / "probe.c"
        source.write_text(program)
        result = _run([cc, "-fopenmp", str(source), "-o", str(Path(folder) / "probe")], cwd=folder)
        return result.returncode == 0


BLAS_CHOICES = ("auto", "openblas", "mkl", "ember")


def blas() -> BlasInfo | None:
    """The GEMM generated code links, as ``config.blas`` says: "openblas", "mkl",
    "ember" (Ember's own GEMM, ember_gemm.py), or "auto" (per shape class, whichever of
    those is installed measured fastest on this host: blas_choice.py); None when the
    chosen one is not installed."""
    if config.blas == "ember":
        return _ember_gemm() if find_toolchain() is not None else None
    if config.blas == "auto":
        return _auto_blas()
    return _find_blas(config.blas)


def _ember_gemm(path: Path | None = None) -> BlasInfo:
    """Ember's GEMM library at ``path``, or as the current toolchain builds it (once per
    target ISA and flags, through the compile cache), called for every product."""
    from ember.backends.cpu import blas_choice, ember_gemm

    path = path or ember_gemm.library_path()
    return BlasInfo(name="ember", lib_dir=str(path.parent),
                    compile_flags=(f"-DEMBER_GEMM_OWN_CLASSES={blas_choice.ALL_CLASSES}",),
                    link_flags=(str(path),), version=f"ember-gemm {path.stem[:16]}", half=True)


def _auto_blas() -> BlasInfo | None:
    toolchain = find_toolchain()
    from ember.backends.cpu.backend import num_threads

    return _measured_blas(toolchain, str(default_cache().directory), num_threads())


@functools.lru_cache(maxsize=None)
def _measured_blas(toolchain: Toolchain | None, cache_directory: str,
                   threads: int) -> BlasInfo | None:
    """The choice of "auto" for this toolchain, cache and thread count, among each vendor
    BLAS installed and Ember's GEMM (blas_choice.auto_choice).

    Ember's GEMM is a candidate once its library is in the compile cache: building it
    takes seconds, which the first compile of a process with an empty cache (a user's
    first run, ``ember bench``'s cold compile) must not wait for. So where a BLAS is
    installed and the library is not built yet, it is built in the background (at a
    low priority, as the launcher is) and "auto" is the BLAS (MKL where installed, else
    OpenBLAS), unmeasured, until a later process finds the library, measures once and
    keeps the rates. Where no BLAS is installed it is built here."""
    from ember.backends.cpu import blas_choice, ember_gemm

    vendors = {info.name: info for info in (_mkl(), _openblas()) if info is not None}
    own = None
    if toolchain is not None:
        built = ember_gemm.built_library_path()
        own = _ember_gemm(built) if built is not None or not vendors else None
        if own is None:
            ember_gemm.start_building()
    candidates = {**vendors, **({blas_choice.OWN: own} if own is not None else {})}
    choice = blas_choice.auto_choice(candidates, threads,
                                     toolchain.target_isa if toolchain else "", _cpu_identity())
    if choice.blas is None:
        return own
    vendor = vendors[choice.blas]
    if own is None:
        return vendor
    # (linked even for no class: the 16-bit products are Ember's alone)
    classes = [name for name, bit in blas_choice.CLASS_BITS.items()
               if choice.own_classes & bit] or ["16-bit operands"]
    # (named for whoever computes the wide products: the floors of `ember bench`)
    wide_by_own = bool(choice.own_classes & blas_choice.CLASS_BITS["wide"])
    return BlasInfo(
        name="ember" if wide_by_own else vendor.name, lib_dir=vendor.lib_dir,
        compile_flags=(*vendor.compile_flags,
                       f"-DEMBER_GEMM_OWN_CLASSES={choice.own_classes}"),
        link_flags=(*own.link_flags, *vendor.link_flags),
        version=f"{vendor.version} + {own.version} for {', '.join(classes)}", half=True)


@functools.lru_cache(maxsize=None)
def _find_blas(choice: str) -> BlasInfo | None:
    if choice not in BLAS_CHOICES:
        raise ValueError(f"unknown BLAS {choice!r}; choose one of {', '.join(BLAS_CHOICES)}")
    return _mkl() if choice == "mkl" else _openblas()


def _openblas() -> BlasInfo | None:
    """The ``scipy-openblas32`` wheel's OpenBLAS, or None when it is not installed.

    The package is located, not imported: its import reads the package metadata of
    every installed distribution (about 20 ms, on every process's first compile)."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(spec.submodule_search_locations[0]).resolve()
    lib_dir = str(package / "lib")
    return BlasInfo(
        name="openblas",
        lib_dir=lib_dir,
        compile_flags=(),
        link_flags=(f"-L{lib_dir}", "-lscipy_openblas", f"-Wl,-rpath,{lib_dir}"),
        version=f"scipy-openblas32 {_wheel_version(package)}",
    )


def _mkl() -> BlasInfo | None:
    """The ``mkl`` wheel's single dynamic library (``libmkl_rt``), or None when it is not
    installed or does not load. The wheel puts it in the ``lib`` folder of the
    installation prefix (there is no Python package). Generated code opens it when it
    loads (include/ember_blas.h): linking it would cost ~0.1 s per module."""
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix, site.getuserbase()]):
        found = sorted((Path(prefix) / "lib").glob("libmkl_rt.so.*"))
        if not found:
            continue
        try:
            library = ctypes.CDLL(str(found[-1]))
        except OSError:
            return None
        if not hasattr(library, "cblas_sgemm"):  # not the BLAS we expect
            return None
        version = next((name[len("mkl-"):-len(".dist-info")] for folder in sys.path
                        if folder.endswith("site-packages") and os.path.isdir(folder)
                        for name in os.listdir(folder)
                        if name.startswith("mkl-") and name.endswith(".dist-info")),
                       "unknown")
        return BlasInfo(
            name="mkl",
            lib_dir=str(found[-1].parent),
            compile_flags=("-DEMBER_BLAS_MKL",
                           f"-DEMBER_MKL_RT={json.dumps(str(found[-1]), ensure_ascii=False)}"),
            link_flags=("-ldl",),
            version=f"mkl {version}",
        )
    return None


def _wheel_version(package: Path) -> str:
    """The version in the name of the wheel's ``.dist-info`` folder next to the package."""
    prefix = package.name + "-"
    for name in sorted(os.listdir(package.parent)):
        if name.startswith(prefix) and name.endswith(".dist-info"):
            return name[len(prefix):-len(".dist-info")]
    return "unknown"


def compile_shared_library(
    source: str | Sequence[str],
    *,
    name: str,
    link_blas: bool = False,
    extra_flags: Sequence[str] = (),
    blas_info: BlasInfo | None = None,
) -> Path:
    """Compile C ``source`` to a shared object (through the compile cache); return its path.

    ``source`` may be several translation units: they are compiled in parallel and
    linked into one library. ``name`` labels the kernel in logs and error reports.
    ``link_blas`` links the GEMM ``config.blas`` chooses, ``blas_info`` this one instead
    (the BLAS choice's probes). Raises ``BackendUnavailableError`` when there is no
    compiler (or no BLAS but ``link_blas``), and ``CompileError`` when the compiler
    rejects the source.
    """
    build = _LibraryBuild(source, name, link_blas, extra_flags, blas_info)
    return default_cache().get_or_build(build.key_parts, ".so", build.run)


def build_command(source: str | Sequence[str], *, name: str, link_blas: bool = False,
                  extra_flags: Sequence[str] = ()) -> str:
    """The compiler calls ``compile_shared_library`` makes for ``source`` (units named
    as ``_unit_name`` names them, output ``<name>.so``), one line each."""
    build = _LibraryBuild(source, name, link_blas, extra_flags)
    steps = _commands(build.cc, _unit_files(name, len(build.units)), build.compile_flags,
                      build.link_flags, f"{safe_file_name(name)}.so")
    return "\n".join(shlex.join(command) for commands in steps for command in commands)


def find_shared_library(source: str | Sequence[str], *, name: str, link_blas: bool = False,
                        extra_flags: Sequence[str] = (),
                        blas_info: BlasInfo | None = None) -> Path | None:
    """The library ``compile_shared_library`` would return, if the compile cache holds it
    already (else None: nothing is built)."""
    build = _LibraryBuild(source, name, link_blas, extra_flags, blas_info)
    return default_cache().find(key_of(build.key_parts, ".so"), ".so")


class _LibraryBuild:
    """How to build a library, and its compile-cache key."""

    def __init__(self, source: str | Sequence[str], name: str, link_blas: bool,
                 extra_flags: Sequence[str], blas_info: BlasInfo | None = None) -> None:
        toolchain = _required_toolchain()
        self.cc = toolchain.cc
        self.name = name
        self.units = [source] if isinstance(source, str) else list(source)
        if blas_info is None and link_blas:
            blas_info = _with_gemm_wrapper(_required_blas())
        self.compile_flags, self.link_flags = _flags(blas_info, extra_flags)
        self.key_parts = [*_toolchain_key(toolchain, self.compile_flags, self.link_flags,
                                          blas_info),
                          f"units:{len(self.units)}", *self.units]

    def run(self, output: Path) -> None:
        _run_compiler(self.cc, self.units, self.name, self.compile_flags, self.link_flags,
                      output)


def _flags(blas_info: BlasInfo | None,
           extra_flags: Sequence[str]) -> tuple[list[str], list[str]]:
    """(compile flags, link flags) of a library, from the toolchain's, the GEMM library's
    it links (if any) and ``extra_flags``."""
    toolchain = find_toolchain()
    compile_flags = [*toolchain.base_flags, f"-I{INCLUDE_DIR}"]
    link_flags = list(_LINK_FLAGS)
    if blas_info is not None:
        compile_flags += blas_info.compile_flags
        link_flags = [*blas_info.link_flags, *link_flags]
    return compile_flags + list(extra_flags), link_flags


def _toolchain_key(toolchain: Toolchain, compile_flags: Sequence[str],
                   link_flags: Sequence[str], blas_info: BlasInfo | None) -> list[str]:
    """Everything but the source that changes a library: compiler, target, flags,
    bundled headers, BLAS."""
    return [_CACHE_FORMAT, toolchain.cc, toolchain.version, toolchain.target_isa,
            shlex.join(compile_flags), shlex.join(link_flags), _include_digest(),
            blas_info.version if blas_info is not None else "no-blas"]


def parallel_jobs() -> int:
    """How many compiler processes may run at once: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def library_identity(extra_flags: Sequence[str] = ()) -> list[str]:
    """Everything but the source that decides a library built with ``extra_flags``
    (compiler, target, flags, bundled headers, the BLAS where installed): a key part for
    caches of what is derived from a library without knowing its source."""
    toolchain = _required_toolchain()
    blas_info = blas()
    compile_flags, link_flags = _flags(blas_info, extra_flags)
    return _toolchain_key(toolchain, compile_flags, link_flags, blas_info)


def _unit_name(name: str, number: int, count: int) -> str:
    return name if count == 1 else f"{name}.{number}"


def _required_toolchain() -> Toolchain:
    toolchain = find_toolchain()
    if toolchain is None:
        raise BackendUnavailableError(
            "the CPU backend needs a C compiler: install gcc or clang, or set $CC")
    return toolchain


# ember_gemm.h's BLAS wrapper as a library of its own (ember_gemm_f32 / _f64: the split
# over the OpenMP team around single-threaded BLAS calls, the epilogue, activations).
_GEMM_WRAPPER_SOURCE = ('#define EMBER_GEMM_LINKAGE __attribute__((visibility("default")))\n'
                        '#include "ember_gemm.h"\n')


def _with_gemm_wrapper(info: BlasInfo) -> BlasInfo:
    """``info``, linking ember_gemm.h's wrapper from its library once the compile cache
    holds that: compiled into every module that multiplies matrices, the wrapper costs
    gcc about 0.5 s, four times the fused kernels of an MLP's train step. Until then the
    module compiles it, and the library is built in the background, as Ember's GEMM
    library is (a first compile neither waits for nor competes much with it)."""
    build = _gemm_wrapper_build(info)
    build.start()
    path = build.loaded
    if path is None or not path.exists():
        return info
    return dataclasses.replace(
        info, compile_flags=(*info.compile_flags, "-DEMBER_GEMM_WRAPPER_LINKED"),
        link_flags=(f"-L{path.parent}", f"-l:{path.name}", f"-Wl,-rpath,{path.parent}",
                    *info.link_flags),
        version=f"{info.version} + wrapper {path.stem}")


def links_gemm_wrapper() -> bool:
    """Whether a module that multiplies matrices, built now, links the wrapper's library
    (else it compiles the wrapper: the cost its C units are balanced by)."""
    try:
        info = _required_blas()
    except BackendUnavailableError:
        return False
    return "-DEMBER_GEMM_WRAPPER_LINKED" in _with_gemm_wrapper(info).compile_flags


def gemm_wrapper_path() -> Path | None:
    """The library of ember_gemm.h's wrapper for the BLAS ``config.blas`` chooses, after
    waiting for its background build (None where it failed)."""
    return _gemm_wrapper_build(_required_blas()).wait()


def built_gemm_wrapper_path() -> Path | None:
    """The wrapper's library for the BLAS ``config.blas`` chooses, if the compile cache
    holds it (nothing is built)."""
    return find_shared_library(_GEMM_WRAPPER_SOURCE, **_wrapper_options(_required_blas()))


def _wrapper_options(info: BlasInfo) -> dict:
    return {"name": "ember_gemm_wrapper", "blas_info": info}


def _gemm_wrapper_build(info: BlasInfo):
    """The wrapper's build for ``info``, once per toolchain and compile cache."""
    return _wrapper_build_in(info, find_toolchain(), str(default_cache().directory))


@functools.lru_cache(maxsize=None)
def _wrapper_build_in(info: BlasInfo, toolchain: Toolchain | None, cache_directory: str):
    from ember.backends.cpu.background_build import BackgroundBuild

    options = _wrapper_options(info)
    return BackgroundBuild(
        "ember-gemm-wrapper",
        find=lambda: find_shared_library(_GEMM_WRAPPER_SOURCE, **options),
        build=lambda: compile_shared_library(_GEMM_WRAPPER_SOURCE, **options),
        load=lambda path: path)


def _required_blas() -> BlasInfo:
    info = blas()
    if info is None:
        wheel = "mkl" if config.blas == "mkl" else "scipy-openblas32"
        raise BackendUnavailableError(
            f"this kernel calls BLAS, which needs the {wheel} wheel: pip install {wheel} "
            f"(or pip install 'ember[cpu]' for OpenBLAS)")
    return info


def _build(cc: str, units: Sequence[str], name: str, compile_flags: Sequence[str],
           link_flags: Sequence[str], output: Path
           ) -> tuple[list[str], subprocess.CompletedProcess, str] | None:
    """Run the compiler on ``units`` into ``output``: None where it succeeded, else the
    failed command, its result and the source it compiled."""
    with tempfile.TemporaryDirectory(prefix="ember-cc-") as folder:
        # Relative source names keep temp paths out of the compiler's messages.
        files = _unit_files(name, len(units))
        for file, unit in zip(files, units):
            (Path(folder) / file).write_text(unit)
        for commands in _commands(cc, files, compile_flags, link_flags, str(output)):
            for command, result, unit in zip(commands, _run_all(commands, folder), units):
                if result.returncode < 0:
                    raise CompileError(f"the C compiler was stopped (signal {-result.returncode})")
                if result.returncode != 0:
                    return command, result, unit if len(commands) > 1 else "\n".join(units)
    return None


@functools.lru_cache(maxsize=None)
def _include_digest() -> str:
    """Hash of the bundled headers: editing ember_math.h must change every cache key."""
    digest = hashlib.sha256()
    for header in sorted(INCLUDE_DIR.glob("*.h")):
        digest.update(header.name.encode() + b"\0" + header.read_bytes() + b"\0")
    return digest.hexdigest()


def _run_compiler(cc: str, units: Sequence[str], name: str, compile_flags: Sequence[str],
                  link_flags: Sequence[str], output: Path) -> None:
    """Build ``output`` from ``units``: one compiler call for one unit; else every unit
    compiled to an object file at once (one process each), then linked."""
    start = time.perf_counter()
    failure = _build(cc, units, name, compile_flags, link_flags, output)
    if failure is not None and "internal compiler error" in _compiler_output(failure[1]):
        # (the compiler's bug, not the kernel's: GCC 12 crashes vectorizing for AVX-512 a
        # 4-element XOR reduction of floats' float64 bits; the loop unvectorized builds)
        failure = _build(cc, units, name, [*compile_flags, "-fno-tree-vectorize"], link_flags,
                         output)
    if failure is not None:
        command, result, unit = failure
        raise default_cache().rejected(
            f"the C compiler rejected the generated kernel {name!r} (exit code "
            f"{result.returncode})", unit, name, ".c", f"command: {shlex.join(command)}",
            _compiler_output(result))
    if config.log_enabled("compile"):
        print(f"ember: cc {name} {time.perf_counter() - start:.3f} s", file=sys.stderr)


def _unit_files(name: str, count: int) -> list[str]:
    return [f"{safe_file_name(_unit_name(name, n, count))}.c" for n in range(count)]


def _commands(cc: str, files: list[str], compile_flags: Sequence[str],
              link_flags: Sequence[str], output: str) -> list[list[list[str]]]:
    """The compiler calls building ``output`` from ``files``, in steps of calls that run
    at once: one call for one file; else each file to an object file, then the link."""
    if len(files) == 1:
        return [[[cc, *compile_flags, files[0], "-o", output, *link_flags]]]
    objects = [file[:-2] + ".o" for file in files]
    return [[[cc, *compile_flags, "-c", file, "-o", obj] for file, obj in zip(files, objects)],
            [[cc, *compile_flags, *objects, "-o", output, *link_flags]]]


_running: set[subprocess.Popen] = set()  # compilers running now, for stop_compilers
_running_lock = threading.Lock()
_stopped = False  # set at exit by stop_compilers: no compiler starts after it


def _run_all(commands: Sequence[Sequence[str]], cwd: str) -> list[subprocess.CompletedProcess]:
    """Run ``commands`` at the same time; their results in order."""
    processes: list[subprocess.Popen] = []
    try:
        for command in commands:
            with _running_lock:  # (a build that starts late must not escape stop_compilers)
                if _stopped:
                    raise CompileError("the process is exiting: compilers were stopped")
                processes.append(subprocess.Popen(list(command), cwd=cwd,
                                                  stdout=subprocess.PIPE,
                                                  stderr=subprocess.PIPE, text=True))
                _running.add(processes[-1])
        results = []
        for command, process in zip(commands, processes):
            stdout, stderr = process.communicate()
            results.append(subprocess.CompletedProcess(command, process.returncode, stdout,
                                                       stderr))
        return results
    except OSError as error:
        raise CompileError(f"could not run the C compiler {commands[0][0]}: {error}") from error
    finally:
        for process in processes:
            if process.poll() is None:  # left running by an error
                process.kill()
                process.wait()
        with _running_lock:
            _running.difference_update(processes)


def stop_compilers() -> None:
    """At exit: kill the compilers running now (those of background builds), and start
    no more. Their builds then fail and clean up after themselves."""
    global _stopped
    with _running_lock:
        _stopped = True
        for process in _running:
            try:
                process.kill()
            except OSError:
                pass


def _compiler_output(result: subprocess.CompletedProcess) -> str:
    """What the compiler printed, cut to ``_MAX_ERROR_LINES`` and ``_MAX_ERROR_CHARS``."""
    lines = (result.stderr or result.stdout or "").strip().splitlines()
    if len(lines) > _MAX_ERROR_LINES:
        lines = lines[:_MAX_ERROR_LINES] + [f"... ({len(lines) - _MAX_ERROR_LINES} more lines)"]
    return "\n".join(lines)[:_MAX_ERROR_CHARS]


_libraries: dict[str, ctypes.CDLL] = {}
_libraries_lock = threading.Lock()


def load_library(path: Path | str) -> ctypes.CDLL:
    """``ctypes.CDLL`` of a shared object, loaded once per path in this process."""
    key = str(Path(path).resolve())
    with _libraries_lock:
        library = _libraries.get(key)
        if library is None:
            with _runtime_settings():
                library = ctypes.CDLL(key)
            _libraries[key] = library
        return library


# What the runtimes a generated library brings in (OpenBLAS, the OpenMP runtime) read
# once, when they are loaded: (variable, value, variables by which the user decides it
# instead). Each is set only while loading, and only where the user has set none of them.
_RUNTIME_SETTINGS = (
    # Generated code calls OpenBLAS single-threaded from OpenMP's threads; the thread
    # OpenBLAS would start at load spins for about 0.1 s, taking a core from the first
    # call. (It still starts threads when asked for more.)
    ("OPENBLAS_NUM_THREADS", "1", ()),
    # An OpenMP thread waiting for work (at a region's end, or for the next region) spins
    # 20k turns of libgomp's pause loop (~0.2 ms here) before it sleeps, not the default
    # 300k (~3 ms). When other processes use the cores, a thread spinning while its
    # partner waits for a core wastes its own core for the whole spin, in every parallel
    # region: an MLP train step on 2 cores beside one busy process took 110 ms, 31 ms
    # with this. Long enough to bridge the gaps between the regions of one call.
    ("GOMP_SPINCOUNT", "20000", ("OMP_WAIT_POLICY",)),
)


@contextlib.contextmanager
def _runtime_settings() -> Iterator[None]:
    """Apply ``_RUNTIME_SETTINGS`` while a library (and what it links) is loaded."""
    applied = [(name, value) for name, value, deciders in _RUNTIME_SETTINGS
               if not any(n in os.environ for n in (name, *deciders))]
    os.environ.update(applied)
    try:
        yield
    finally:
        for name, _ in applied:
            os.environ.pop(name, None)
