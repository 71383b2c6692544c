"""Ember's own GEMM (``config.blas = "ember"``): the ``ember_gemm_f32`` and
``ember_gemm_f64`` that generated modules call (include/ember_gemm.h), computed by a
blocked, register-tiled product for the target's vector ISA (include/ember_gemm_lib.c)
instead of a BLAS.

It is a library of its own, built once per toolchain (compiler, target ISA, flags)
through the compile cache and linked by every module that multiplies matrices; no
module compiles it again.
"""
from __future__ import annotations

from pathlib import Path

from ember.backends.cpu.toolchain import INCLUDE_DIR, compile_shared_library

SOURCE = INCLUDE_DIR / "ember_gemm_lib.c"
# `c += a * b` in the microkernel must be one fused multiply-add (-std=c11 turns
# contraction off by default).
FLAGS = ("-ffp-contract=fast",)


def library_path() -> Path:
    """The GEMM library for the current toolchain, built on first use."""
    return compile_shared_library(SOURCE.read_text(), name="ember_gemm", extra_flags=FLAGS)
