"""Resources: cached jitted calls do not grow memory, arrays free their buffers when
they die, and a C compiler error surfaces as CompileError with the source saved."""
from __future__ import annotations

import gc
import os
import re
import weakref
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import lax
from ember.errors import CompileError, EmberError
from ember.runtime.devices import available_backends

CALLS = 10_000
SLACK_BYTES = 2 << 20  # 2 MiB over 10,000 calls: a leak of 200 bytes per call shows
NATIVE = [b for b in available_backends() if b != "reference"]


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def step(params, x):
    w, b = params
    h = lax.tanh(lax.add(lax.mul(x, w), b))
    return lax.reduce_sum(h, (0,)), {"h": h}


def test_repeated_calls_of_a_cached_function_keep_memory_flat(backend):
    jitted = ember.jit(step)
    params = (np.full(64, 0.5, np.float32), ember.device_put(np.ones(64, np.float32)))
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    for _ in range(1000):  # warm up: compile, fill caches and allocator pools
        jitted(params, x)
    gc.collect()
    before = resident_bytes()
    for _ in range(CALLS):
        total, _ = jitted(params, x)
    gc.collect()
    grown = resident_bytes() - before
    assert grown < SLACK_BYTES, f"resident memory grew by {grown} bytes over {CALLS} calls"
    assert jitted._cache_size() == 1
    np.testing.assert_allclose(total, np.tanh(x * 0.5 + 1).sum(), rtol=1e-5)


@pytest.mark.parametrize("make", ["jit", "eager"])
def test_buffers_die_with_their_arrays(backend, make):
    x = ember.device_put(np.ones(1 << 20, np.float32))
    double = ember.jit(lambda v: lax.mul(v, 2.0)) if make == "jit" else (lambda v: lax.mul(v, 2.0))
    out = double(x)
    assert float(np.asarray(out)[0]) == 2.0
    refs = [weakref.ref(out), weakref.ref(out._buffer), weakref.ref(x), weakref.ref(x._buffer)]
    del out, x
    gc.collect()
    assert [r() is None for r in refs] == [True] * 4


@pytest.mark.skipif(not NATIVE, reason="no backend that compiles native code here")
@pytest.mark.parametrize("native", NATIVE)
def test_compiler_error_is_a_compile_error_with_the_source_saved(native, tmp_path):
    def fn(x):
        return lax.sin(lax.mul(x, 3.0))

    x = np.arange(5, dtype=np.float32)
    with ember.config.override(cflags="-include ember-no-such-header.h",
                               cache_dir=str(tmp_path / "cache")):
        with pytest.raises(CompileError) as caught:
            ember.jit(fn, backend=native)(x)
    error = caught.value
    assert isinstance(error, EmberError) and isinstance(error, RuntimeError)
    message = str(error)
    assert "bug in Ember" in message and "ember-no-such-header.h" in message
    saved = Path(re.search(r"source: (\S+)", message).group(1))
    assert saved.is_file() and saved.stat().st_size > 0
    assert "sin" in saved.read_text()  # the generated code of this very program
    np.testing.assert_allclose(ember.jit(fn, backend=native)(x), np.sin(x * 3), rtol=1e-6)
