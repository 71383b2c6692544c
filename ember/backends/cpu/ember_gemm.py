"""Ember's own GEMM (``config.blas = "ember"``, or "auto" where it measured fastest): the
``ember_own_gemm_f32`` and ``_f64`` that generated modules call through
include/ember_gemm.h, and ``ember_own_gemm_bf16`` and ``_f16`` (16-bit operands, float32
results), computed by a blocked, register-tiled product for the target's vector ISA
(include/ember_gemm_lib.c) instead of a BLAS.

It is a library of its own, built once per toolchain (compiler, target ISA, flags)
through the compile cache and linked by every module that multiplies matrices; no
module compiles it again.
"""
from __future__ import annotations

import functools
from pathlib import Path

from ember.backends.cpu.background_build import BackgroundBuild
from ember.backends.cpu.toolchain import (INCLUDE_DIR, Toolchain, compile_shared_library,
                                          find_shared_library, find_toolchain)
from ember.runtime.compile_cache import default_cache

SOURCE = INCLUDE_DIR / "ember_gemm_lib.c"
# `c += a * b` in the microkernel must be one fused multiply-add (-std=c11 turns
# contraction off by default).
FLAGS = ("-ffp-contract=fast",)
# One unit per element type, compiled in parallel: float32, float64, both 16-bit formats,
# and their products with float32 operands cast as packed (EMBER_GEMM_TYPE in
# ember_gemm_lib.c).
_TYPE_BITS = (32, 64, 16, 17)


def library_path() -> Path:
    """The GEMM library for the current toolchain and compile cache, built on first use.

    Asked for at every compile that links it (and by the CPU backend's policy, per
    equation), so the path is remembered per toolchain and cache directory while the
    file is there."""
    path = _remembered(find_toolchain(), str(default_cache().directory))
    if not path.exists():  # (removed since: build it again)
        _remembered.cache_clear()
        path = _remembered(find_toolchain(), str(default_cache().directory))
    return path


def built_library_path() -> Path | None:
    """The library, if the compile cache holds it already (nothing is built)."""
    return find_shared_library(_units(), name="ember_gemm", extra_flags=FLAGS)


def start_building() -> None:
    """Build the library in the background if the compile cache lacks it, once per
    process (``blas="auto"`` measures it against the BLAS in a later process)."""
    _background.start()


_background = BackgroundBuild("ember-gemm", find=built_library_path, build=library_path,
                              load=lambda path: path)


@functools.lru_cache(maxsize=None)
def _remembered(toolchain: Toolchain | None, cache_directory: str) -> Path:
    return compile_shared_library(_units(), name="ember_gemm", extra_flags=FLAGS)


def _units() -> list[str]:
    text = SOURCE.read_text()
    return [f"#define EMBER_GEMM_TYPE {bits}\n{text}" for bits in _TYPE_BITS]
