"""``compiled.profile()``: programs compiled with ``config.profile`` count the calls and
time of every kernel (in C for native steps, in Python for host calls)."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_testing import requires_cpu

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import toolchain
from ember.compiler import c_module as module
from ember.config import config
from ember.errors import EmberValueError

pytestmark = requires_cpu

rng = np.random.default_rng(8)
x = rng.standard_normal((96, 64)).astype(np.float32)
w = rng.standard_normal((64, 64)).astype(np.float32)


def program(x, w):
    h = jnp.tanh(x @ w)
    return jnp.sum(h * h, axis=0), lax.cumlogsumexp(h, 1)  # a GEMM, kernels, a host call


def compiled(tmp_path, profile=True):
    with config.override(cache_dir=str(tmp_path / "cache"), profile=profile):
        return ember.jit(program, backend="cpu").lower(x, w).compile()


def test_every_kernel_counts_its_calls_and_time(tmp_path):
    c = compiled(tmp_path)
    for _ in range(3):
        c(x, w)
    profile = c.profile()
    assert [row.kernel.name for row in profile] == [k.name for k in c.kernels]
    assert {row.kernel.kind for row in profile} >= {"library", "kernel", "host"}
    assert all(row.calls == 3 and row.seconds > 0 for row in profile)
    assert profile.total_seconds == pytest.approx(sum(row.seconds for row in profile))
    table = str(profile)
    assert all(k.name in table for k in c.kernels) and "total" in table


def test_the_table_leaves_out_outputs_reshaped_in_place(tmp_path):
    def reshaped(x, w):
        y = jnp.tanh(x @ w)
        return y.reshape(-1), jnp.sum(y)  # (y written into the first output's memory)

    with config.override(cache_dir=str(tmp_path / "cache"), profile=True):
        c = ember.jit(reshaped, backend="cpu").lower(x, w).compile()
    c(x, w)
    views = [k.name for k in c.kernels if k.kind == "view"]
    assert len(views) == 1 and len(c.profile()) == len(c.kernels)
    table = str(c.profile())
    assert views[0] not in table and "1 view step(s), which run no code" in table
    assert all(k.name in table for k in c.kernels if k.kind != "view")


def test_reset(tmp_path):
    c = compiled(tmp_path)
    c(x, w)
    assert all(row.calls == 1 for row in c.profile(reset=True))
    assert all(row.calls == 0 and row.seconds == 0 for row in c.profile())
    c(x, w)
    assert all(row.calls == 1 for row in c.profile())


def test_a_module_of_several_units_counts_every_step(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "MIN_UNIT_COST", 1)
    monkeypatch.setattr(toolchain, "parallel_jobs", lambda: 3)
    c = compiled(tmp_path)
    c(x, w)
    c(x, w)
    assert all(row.calls == 2 for row in c.profile())


def test_a_program_compiled_without_profiling_says_how(tmp_path):
    c = compiled(tmp_path, profile=False)
    c(x, w)
    with pytest.raises(EmberValueError, match="compiled without profiling"):
        c.profile()
    # the flag is part of the program's key: turned on, it compiles anew
    profiled = compiled(tmp_path)
    profiled(x, w)
    assert all(row.calls == 1 for row in profiled.profile())
