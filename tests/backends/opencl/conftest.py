"""Helpers of the OpenCL backend suite: skip when no OpenCL device is present, run a
program on 'opencl' and on 'reference', compare with a tolerance fitting the dtype."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.core import dtypes
from ember.runtime.devices import available_backends

requires_opencl = pytest.mark.skipif(
    "opencl" not in available_backends(),
    reason="no OpenCL device: install PoCL (.ci/install-opencl) and pyopencl")

# (rtol, atol): OpenCL's float32 built-ins are allowed a few ulp (PoCL uses SLEEF);
# half precision is computed in float32 and rounded once, where NumPy rounds every op.
TOLERANCE = {"float16": (4e-3, 1e-3), "bfloat16": (2e-2, 1e-2), "float32": (2e-5, 1e-6),
             "float64": (1e-12, 1e-14)}


def assert_same(got, want, tolerance=None, what: str = "") -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if dtypes.is_floating(want.dtype):
        rtol, atol = tolerance or TOLERANCE[want.dtype.name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_trees_same(got, want, tolerance=None) -> None:
    got_leaves, got_tree = ember.tree_util.tree_flatten(got)
    want_leaves, want_tree = ember.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    paths = [str(i) for i in range(len(want_leaves))]
    if isinstance(want, dict):
        paths = sorted(want)  # dict leaves flatten in sorted key order
    for path, g, w in zip(paths, got_leaves, want_leaves):
        assert_same(g, w, tolerance, what=f"output {path}")
