"""A compiled call keeps its OpenMP team on distinct cores (include/ember_team.h): which
modules hold their team, and what a call leaves behind: the caller's own affinity as it
was, and each other thread of the team held on a core of its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from cpu_testing import assert_matches_reference, is_program, requires_cpu

import ember.numpy as jnp
from ember import jit
from ember.backends.cpu import toolchain
from ember.config import config

pytestmark = requires_cpu

rng = np.random.default_rng(5)
big = rng.standard_normal((512, 1024)).astype(np.float32)
weights = rng.standard_normal((1024, 256)).astype(np.float32)


def elementwise(x):
    return jnp.tanh(x) * 2.0 + 1.0


def layer(x, w):
    return jnp.maximum(x @ w, 0.0)


def module_source(tmp_path, monkeypatch, fun, *args, threads=2, pin=True) -> str:
    """The generated C of ``fun``'s module (all units), compiled into a private cache."""
    seen = []
    compile_library = toolchain.compile_shared_library

    def recording(source, **kwargs):
        if is_program(kwargs["name"]):
            seen.append(source if isinstance(source, str) else "\n".join(source))
        return compile_library(source, **kwargs)

    monkeypatch.setattr(toolchain, "compile_shared_library", recording)
    with config.override(cache_dir=str(tmp_path / "cache"), num_threads=threads,
                         pin_threads=pin):
        jit(fun, backend="cpu")(*args)
    assert len(seen) == 1
    return seen[0]


@pytest.mark.parametrize("fun, args", [(elementwise, (big,)), (layer, (big, weights))])
def test_parallel_module_holds_its_team(tmp_path, monkeypatch, fun, args):
    source = module_source(tmp_path, monkeypatch, fun, *args)
    assert source.startswith('#include "ember_team.h"')  # first: it sets _GNU_SOURCE
    assert source.count("ember_team_hold(2)") == 1
    assert source.count("ember_team_release(&team)") == 1


@pytest.mark.parametrize("case, fun, args, threads, pin", [
    ("one thread", elementwise, (big,), 1, True),
    ("too small to split", elementwise, (big[:2, :4],), 2, True),
    ("pin_threads off", layer, (big, weights), 2, False),
])
def test_no_team_held(tmp_path, monkeypatch, case, fun, args, threads, pin):
    source = module_source(tmp_path, monkeypatch, fun, *args, threads=threads, pin=pin)
    assert "ember_team" not in source, case


def test_results_with_a_held_team():
    with config.override(num_threads=2):
        assert_matches_reference(layer, big, weights, tolerance=(1e-4, 1e-4))


# Runs in a fresh process: the OpenMP runtime reads its environment once, at load.
PROBE = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import ember, ember.numpy as jnp

    def masks():
        return {int(t): sorted(os.sched_getaffinity(int(t)))
                for t in os.listdir("/proc/self/task")}

    before = masks()
    main = os.getpid()
    f = ember.jit(lambda x: jnp.tanh(x) * 2.0 + 1.0, backend="cpu")
    x = np.ones((512, 1024), np.float32)
    for _ in range(3):
        np.asarray(f(x))
    after = masks()
    new = [mask for tid, mask in after.items() if tid not in before]
    print(json.dumps({"main_before": before[main], "main_after": after[main], "new": new}))
""")


def probe(tmp_path, **env) -> dict:
    environment = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"),
                   "EMBER_NUM_THREADS": "2", **env}
    for name in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"):
        if name not in env:
            environment.pop(name, None)
    done = subprocess.run([sys.executable, "-c", PROBE], env=environment, text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


needs_two_cores = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2
    or not sys.platform.startswith("linux"), reason="needs Linux and two allowed cores")


@needs_two_cores
def test_call_holds_the_team_on_distinct_cores_and_restores_the_caller(tmp_path):
    seen = probe(tmp_path)
    assert seen["main_after"] == seen["main_before"]  # the caller's mask is given back
    held = [mask for mask in seen["new"] if len(mask) == 1]
    assert len(held) == 1, seen  # the team's one other thread, on one core
    assert held[0][0] in seen["main_before"]


@needs_two_cores
@pytest.mark.parametrize("env", [{"EMBER_PIN_THREADS": "0"}, {"OMP_PROC_BIND": "false"}])
def test_placement_left_alone(tmp_path, env):
    seen = probe(tmp_path, **env)
    assert seen["main_after"] == seen["main_before"]
    assert all(mask == seen["main_before"] for mask in seen["new"]), seen
