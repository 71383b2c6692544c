"""Helpers for the CPU backend tests: run a function jitted on 'cpu' and on 'reference'
and compare the results with a tolerance that fits the dtype."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember.core import dtypes
from ember.runtime.devices import available_backends

requires_cpu = pytest.mark.skipif("cpu" not in available_backends(),
                                  reason="no C compiler on this machine")

# A program's library name (compiler.pipeline.source_name), not the libraries the backend
# builds for itself beside it (the launcher, Ember's GEMM, the GEMM wrapper).
_PROGRAM_NAME = re.compile(r"ember_[0-9a-f]{12}")


def is_program(name: str) -> bool:
    """Whether ``compile_shared_library`` was asked to build a program's module."""
    return _PROGRAM_NAME.fullmatch(name) is not None

# (rtol, atol) by dtype: float32 math is the vectorized ember_math.h (a few ulp); half
# precision is computed in float32 and rounded once, where NumPy rounds every op.
TOLERANCE = {"float16": (4e-3, 1e-3), "bfloat16": (2e-2, 1e-2), "float32": (2e-5, 1e-6),
             "float64": (1e-12, 1e-14)}


def run_both(fun, *args, **jit_kwargs):
    cpu = ember.jit(fun, backend="cpu", **jit_kwargs)(*args)
    reference = ember.jit(fun, backend="reference", **jit_kwargs)(*args)
    return cpu, reference


def assert_same(got, want, tolerance: tuple[float, float] | None = None, what: str = "") -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if dtypes.is_floating(want.dtype):
        rtol, atol = tolerance or TOLERANCE[want.dtype.name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_matches_reference(fun, *args, tolerance=None, **jit_kwargs) -> None:
    cpu, reference = run_both(fun, *args, **jit_kwargs)
    cpu_leaves = ember.tree_util.tree_leaves(cpu)
    ref_leaves = ember.tree_util.tree_leaves(reference)
    assert len(cpu_leaves) == len(ref_leaves)
    for index, (got, want) in enumerate(zip(cpu_leaves, ref_leaves)):
        assert_same(got, want, tolerance, what=f"output {index}")


def compiled(fun, *args, **jit_kwargs):
    """The compiled object of ``fun`` on the CPU backend (kernels, as_text, analyses)."""
    return ember.jit(fun, backend="cpu", **jit_kwargs).lower(*args).compile()
