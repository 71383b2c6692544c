"""The OpenCL backend suite's marker: skip when no OpenCL device is present (a module of
its own: test files import it by name, and `conftest` is a name several folders use)."""
from __future__ import annotations

import pytest

from ember.runtime.devices import available_backends

requires_opencl = pytest.mark.skipif(
    "opencl" not in available_backends(),
    reason="no OpenCL device: install PoCL (.ci/install-opencl) and pyopencl")
