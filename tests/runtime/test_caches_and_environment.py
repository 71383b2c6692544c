"""``ember.clear_caches``, ``ember.live_arrays`` and ``ember.print_environment_info``,
with JAX's semantics."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.runtime.compile_cache import default_cache


def _compiles(capsys) -> int:
    """How many programs were compiled since the last call (the 'compile' log)."""
    return sum(line.startswith("ember: compiled") for line in capsys.readouterr().out.splitlines())


def test_a_jitted_function_traces_and_compiles_again_after_clear_caches(capsys):
    traces = []

    @ember.jit
    def f(x):
        traces.append(1)
        return jnp.sin(x) * 2.0 + 1.0

    x = jnp.arange(4.0)
    capsys.readouterr()
    with ember.config.override(log="compile"):
        expected = np.asarray(f(x))
        f(x)
        assert (len(traces), _compiles(capsys)) == (1, 1)
        ember.clear_caches()
        np.testing.assert_allclose(np.asarray(f(x)), expected)
        assert (len(traces), _compiles(capsys)) == (2, 1)
        f(x)  # cached again
        assert (len(traces), _compiles(capsys)) == (2, 0)


def test_clear_caches_reaches_every_jitted_function_and_keeps_the_disk_cache():
    f, g = ember.jit(lambda x: x + 1.0), ember.jit(lambda x: x * 3.0)
    x = jnp.ones(3)
    f(x), g(x)
    cache = default_cache()
    entries = sorted(p.name for p in cache.directory.rglob("*") if p.is_file())
    ember.clear_caches()
    assert f._cache_size() == g._cache_size() == 0
    assert sorted(p.name for p in cache.directory.rglob("*") if p.is_file()) == entries
    if ember.default_backend() == "cpu":  # its programs come from the compile cache
        hits = cache.stats.disk_hits
        f(x)
        assert cache.stats.disk_hits > hits  # read (and checked) on disk again, not built


def test_live_arrays_lists_arrays_alive_and_not_deleted():
    x = jnp.arange(5.0) + 1.0
    donated = jnp.zeros(2) + 1.0
    ember.jit(lambda a: a * 2.0, donate_argnums=0)(donated)
    live = ember.live_arrays()
    assert all(isinstance(a, ember.Array) for a in live)
    assert any(a is x for a in live)
    assert not any(a is donated for a in live)  # donated: deleted, as in JAX
    assert ember.live_arrays(ember.default_backend())  # by name, as JAX's platform=
    del live
    gc.collect()
    before = len(ember.live_arrays())
    del x
    gc.collect()
    assert len(ember.live_arrays()) == before - 1  # it holds no array alive


def test_print_environment_info_prints_or_returns_jax_s_fields(capsys, monkeypatch):
    monkeypatch.setenv("EMBER_TEST_MARKER", "42")
    text = ember.print_environment_info(return_string=True)
    assert capsys.readouterr().out == ""
    fields = [line.split(":")[0] for line in text.splitlines()[:6]]
    assert fields == ["ember", "numpy", "python", "device info", "process_count", "platform"]
    assert f"ember:  {ember.__version__}" in text and np.__version__ in text
    assert f"{ember.default_backend()}-{ember.device_count()}" in text
    assert "EMBER_TEST_MARKER=42" in text
    assert ember.print_environment_info() is None
    assert capsys.readouterr().out.strip() == text.strip()


def test_the_same_names_as_jax():
    jax = pytest.importorskip("jax")
    for name in ("clear_caches", "live_arrays", "print_environment_info"):
        assert callable(getattr(jax, name)) and callable(getattr(ember, name))
    jax_text = jax.print_environment_info(return_string=True)
    ours = ember.print_environment_info(return_string=True)
    assert [line.split(":")[0] for line in jax_text.splitlines()[2:6]] == \
        [line.split(":")[0] for line in ours.splitlines()[1:5]]  # after the versions


def test_live_arrays_skips_dead_weak_proxies():
    """gc.get_objects() can hold weak proxies (other libraries' caches); one whose
    object died raises ReferenceError when asked for its class."""
    import weakref

    class Referent:
        pass

    target = Referent()
    proxy = weakref.proxy(target)
    holder = [proxy]  # a tracked container keeps the proxy where gc sees it
    del target
    gc.collect()
    assert ember.live_arrays() is not None
    assert holder
