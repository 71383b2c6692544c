"""The CPU backend's program cache: a compiled program found by its traced graph, before
any pass runs. Hits in this process and in another one; everything that changes the
program changes the key; damaged entries are rebuilt; details are still shown."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cpu_testing import assert_same, requires_cpu

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import program_cache
from ember.child_process import environment
from ember.passes import pipeline as graph_pipeline
from ember.config import config
from ember.runtime.compile_cache import default_cache

pytestmark = requires_cpu

REPO_ROOT = Path(__file__).resolve().parents[3]
x = np.random.default_rng(1).standard_normal((24, 40)).astype(np.float32)
w = np.random.default_rng(2).standard_normal((40, 40)).astype(np.float32)


def mlp(a, b):
    return jnp.sum(jnp.tanh(a @ b) * 2.0 + 1.0, axis=0)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    # Entries are stored only while the sources are as imported: hold them still (others
    # may be editing this checkout while the tests run).
    digest = program_cache.code_digest()
    monkeypatch.setattr(program_cache, "_scan_code", lambda: digest)
    with config.override(cache_dir=str(tmp_path / "cache")):
        yield tmp_path / "cache"


@pytest.fixture
def passes(monkeypatch):
    """Counts the runs of the CPU's pass pipeline (each full compile runs it once)."""
    runs = []
    run_pipeline = graph_pipeline.run_pipeline

    def counted(graph, backend_name, *args, **kwargs):
        if backend_name == "cpu":
            runs.append(graph)
        return run_pipeline(graph, backend_name, *args, **kwargs)

    monkeypatch.setattr(graph_pipeline, "run_pipeline", counted)
    return runs


def run(fun, *args):
    return np.asarray(ember.jit(fun, backend="cpu")(*args))


def entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("??/*.json"))


def test_a_second_compile_runs_no_pass(cache_dir, passes):
    first = run(mlp, x, w)
    assert len(passes) == 1 and len(entries(cache_dir)) == 1
    second = run(mlp, x, w)  # a new jit: its own memory cache is empty
    assert len(passes) == 1
    np.testing.assert_array_equal(first, second)
    assert_same(second, np.asarray(ember.jit(mlp, backend="reference")(x, w)))


def test_a_cleared_jit_cache_hits_the_program_cache(cache_dir, passes):
    f = ember.jit(mlp, backend="cpu")
    first = np.asarray(f(x, w))
    f.clear_cache()
    np.testing.assert_array_equal(np.asarray(f(x, w)), first)
    assert len(passes) == 1


def test_a_hit_still_shows_kernels_graph_and_analyses(cache_dir, passes):
    full = ember.jit(mlp, backend="cpu").lower(x, w).compile()
    hit = ember.jit(mlp, backend="cpu").lower(x, w).compile()
    assert len(passes) == 1
    assert [k.source for k in hit.kernels] == [k.source for k in full.kernels]
    assert hit.as_text() == full.as_text()
    assert hit.cost_analysis() == full.cost_analysis()
    assert hit.memory_analysis() == full.memory_analysis()
    assert len(passes) == 2  # the details were generated again, once
    assert hit.kernels
    assert len(passes) == 2


@pytest.mark.parametrize("change", ["graph", "shape", "constant", "donation", "cflags",
                                    "threads", "optimize", "code"])
def test_what_changes_the_program_changes_the_key(cache_dir, passes, monkeypatch, change):
    const = np.arange(40, dtype=np.float32)
    fun, args, jit_kwargs = (lambda a, b: jnp.tanh(a @ b) + const), (x, w), {}
    ember.jit(fun, backend="cpu")(*args)
    if change == "graph":
        fun = lambda a, b: jnp.tanh(a @ b) - const
    elif change == "shape":
        args = (x[:8], w)
    elif change == "constant":
        const = const + 1.0
    elif change == "donation":
        jit_kwargs = {"donate_argnums": 0}
        args = (ember.numpy.asarray(x), w)
    elif change == "code":  # another version of Ember (in another process)
        monkeypatch.setattr(program_cache, "code_digest", lambda: "other code")
        monkeypatch.setattr(program_cache, "_scan_code", lambda: "other code")
    overrides = {"cflags": {"cflags": "-DEMBER_TEST_FLAG=1"},
                 "threads": {"num_threads": (config.num_threads or os.cpu_count() or 1) + 1},
                 "optimize": {"optimize": False}}.get(change, {})
    want = ember.jit(fun, backend="reference")(*[np.asarray(a) for a in args])
    with config.override(**overrides):
        got = ember.jit(fun, backend="cpu", **jit_kwargs)(*args)
    assert len(passes) == 2
    assert_same(got, want)


def test_nothing_is_stored_once_the_sources_changed_under_the_process(cache_dir, passes,
                                                                        monkeypatch):
    monkeypatch.setattr(program_cache, "_scan_code", lambda: "edited since the import")
    first = run(mlp, x, w)
    assert entries(cache_dir) == []
    np.testing.assert_array_equal(run(mlp, x, w), first)
    assert len(passes) == 2


def test_the_program_key_leaves_out_source_locations_but_not_operations(cache_dir):
    def key(fun):
        graph = ember.jit(fun).lower(x, w).graph
        return program_cache.program_key(graph, (), ["settings"])

    first = key(lambda a, b: a @ b + 1.0)
    again = key(lambda a, b: a @ b + 1.0)  # same operations, another line
    assert first == again
    assert key(lambda a, b: a @ b + 2.0) != first


def test_graphs_with_opaque_params_are_not_keyed():
    graph = ember.jit(mlp).lower(x, w).graph
    assert program_cache.program_key(graph, (), []) is not None
    eqn = graph.eqns[0]
    for opaque in (len, np.float32(1.0), object()):
        eqn.params["extra"] = opaque
        assert program_cache.program_key(graph, (), []) is None
    del eqn.params["extra"]


@pytest.mark.parametrize("value", [np.float32(0.5), np.array(2, np.int32),
                                   np.ones((1,), np.float32), np.zeros((0, 3), np.float16)])
def test_stored_arrays_keep_their_shape(value):
    # (np.ascontiguousarray made a 0-d literal result 1-d: a scalar came back as [1])
    decoded = program_cache._from_array(program_cache._array(value))
    assert decoded.shape == np.shape(value) and decoded.dtype == np.asarray(value).dtype
    np.testing.assert_array_equal(decoded, value)


def test_programs_with_host_calls_are_not_kept(cache_dir, passes):
    fun = lambda a, b: lax.cumlogsumexp(a @ b, axis=0)  # (a host call)
    first = run(fun, x, w)
    assert entries(cache_dir) == []
    np.testing.assert_array_equal(run(fun, x, w), first)
    assert len(passes) == 2


def test_constants_made_by_the_passes_are_kept_in_the_entry(cache_dir, passes):
    const = np.linspace(-1, 1, 40, dtype=np.float32)
    fun = lambda a: jnp.exp(a) + jnp.cos(jnp.asarray(const)) * 3.0
    first = run(fun, x)
    second = run(fun, x)
    assert len(passes) == 1
    np.testing.assert_array_equal(first, second)
    assert_same(second, np.asarray(ember.jit(fun, backend="reference")(x)))


@pytest.mark.parametrize("damage", ["bytes", "content", "library"])
def test_a_damaged_entry_is_compiled_again_and_rewritten(cache_dir, passes, damage):
    first = run(mlp, x, w)
    [entry] = entries(cache_dir)
    original = entry.read_text()
    if damage == "bytes":  # the sidecar no longer matches
        entry.write_text(original[:-10])
    elif damage == "content":  # intact and well-formed, but naming slots the graph lacks
        data = json.loads(original)
        data["results"][0] = {"buffer": ["output", 5, 0], "aval": data["outputs"][0]}
        data["layout"][1] += 7
        entry.write_text(json.dumps(data))
        digest = hashlib.sha256(entry.read_bytes()).hexdigest()
        entry.with_suffix(".sha256").write_text(digest + "\n")
    else:  # the library it names was removed
        library = json.loads(original)["library"]
        next(cache_dir.glob(f"*/{library}.so")).unlink()
    default_cache()._memory.clear()  # as in a new process
    np.testing.assert_array_equal(run(mlp, x, w), first)
    assert len(passes) == 2
    assert entry.read_text() == original
    run(mlp, x, w)
    assert len(passes) == 2  # valid again


CHILD = """
import json, sys
import numpy as np
import ember, ember.numpy as jnp
from ember.passes import pipeline

if sys.argv[1] == "hit":
    def no_passes(graph, *args, **kwargs):
        raise AssertionError("a program-cache hit runs no pass")
    pipeline.run_pipeline = no_passes

x = np.linspace(-2, 2, 24 * 40, dtype=np.float32).reshape(24, 40)
w = np.linspace(1, -1, 40 * 40, dtype=np.float32).reshape(40, 40)
f = ember.jit(lambda a, b: jnp.sum(jnp.tanh(a @ b) * 2.0 + 1.0, axis=0), backend="cpu")
print(json.dumps(np.asarray(f(x, w)).tolist()))
"""


def _child(cache_dir, mode):
    env = environment(EMBER_CACHE_DIR=str(cache_dir))
    child = subprocess.run([sys.executable, "-c", CHILD, mode], check=False,
                           capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_another_process_hits_the_program_cache(cache_dir):
    first = _child(cache_dir, "fill")
    assert len(entries(cache_dir)) == 1
    assert _child(cache_dir, "hit") == first
