"""ember_gemm.h's BLAS wrapper (the split of a GEMM over the OpenMP team, its epilogue and
activation) is compiled once into a library of its own, built in the background, which
later modules link instead of compiling the wrapper again."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_testing import requires_cpu

import ember
import ember.numpy as jnp
from ember.backends.cpu import toolchain
from ember.config import config

pytestmark = requires_cpu


def _run_and_build_command(tmp_path, fun, *args):
    """``fun(*args)`` jitted on the CPU, and the compiler calls that built it."""
    dump = tmp_path / "dump"
    with config.override(dump_dir=str(dump)):
        result = ember.jit(fun, backend="cpu")(*args)
    (command,) = dump.glob("*/*build_command.txt")
    return result, command.read_text()


@pytest.mark.parametrize("blas", ["openblas", "mkl"])
def test_modules_link_the_wrapper_once_it_is_built(tmp_path, blas):
    if toolchain._mkl() is None and blas == "mkl":
        pytest.skip("MKL is not installed")
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((70, 90), np.float32), rng.standard_normal((90, 40), np.float32)
    expected = np.maximum(x.astype(np.float64) @ w, 0.0) * 2.0
    with config.override(cache_dir=str(tmp_path / "cache"), blas=blas):
        first = ember.jit(lambda x, w: jnp.maximum(x @ w, 0.0) * 2.0, backend="cpu")(x, w)
        path = toolchain.gemm_wrapper_path()
        assert path is not None and path.exists()
        linked, command = _run_and_build_command(
            tmp_path, lambda x, w: jnp.maximum(x @ w, 0.0) * 2.0 + 0.0, x, w)
        assert "-DEMBER_GEMM_WRAPPER_LINKED" in command and path.name in command
        assert toolchain.links_gemm_wrapper()  # (its C units are balanced without it)
    for got in (first, linked):
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-5)
