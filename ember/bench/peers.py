"""The frameworks a run compares: Ember, NumPy, JAX, PyTorch eager and torch.compile.

A peer turns a workload into a ``Runner``: a callable that performs one timed sample and
returns its time and raw result, plus a way to turn that result into NumPy arrays for
the correctness check. Everything that is not the work itself (converting inputs,
tracing, compiling) happens while the runner is built or on its first call, which the
harness never times.

A peer that is not installed raises ``Unavailable`` and its column says "n/a". Ember is
the subject of the benchmark, so Ember failing to import is an error, not an absence.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from ember.bench.trees import tree_map
from ember.bench.workloads import CompileWorkload, Workload

PROBE_TIMEOUT_S = 600


class Unavailable(Exception):
    """This framework, or this workload on it, is not there to measure (a "n/a" cell)."""


@dataclass
class Runner:
    call: Callable[[], tuple[float, Any]]  # one sample: (seconds per call, raw result)
    to_numpy: Callable[[Any], Any]


def timed_calls(fn: Callable, args: tuple, sync: Callable[[Any], Any], calls: int) -> Callable:
    """A sample that makes ``calls`` calls back to back and waits for the last result.

    Waiting only at the end lets asynchronous dispatch (JAX, Ember) overlap calls, as it
    does in a real loop; for one call per sample it is simply call-and-wait.
    """
    def sample() -> tuple[float, Any]:
        start = time.perf_counter()
        for _ in range(calls):
            out = fn(*args)
        sync(out)
        return (time.perf_counter() - start) / calls, out
    return sample


def load_object(ref: str) -> Any:
    """Import ``"package.module:name"``; references travel to probe subprocesses as text."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def load_ember() -> Any:
    """The real Ember namespace: the ``ember`` package itself."""
    import ember
    import ember.nn  # noqa: F401  (subpackages the workloads use)
    import ember.numpy  # noqa: F401
    return ember


def load_jax() -> SimpleNamespace:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
    except ImportError as error:
        raise Unavailable(f"jax is not installed ({error})") from error
    return SimpleNamespace(
        numpy=jax.numpy, nn=jax.nn, jit=jax.jit, grad=jax.grad,
        value_and_grad=jax.value_and_grad, block_until_ready=jax.block_until_ready,
    )


class Peer:
    name: str

    def runner(self, workload: Workload | CompileWorkload, args: tuple, quick: bool,
               scratch: Path) -> Runner:
        raise NotImplementedError


class JaxStylePeer(Peer):
    """A framework that runs the JAX-style workloads through a namespace object.

    The namespace comes from a loader named by reference (``"module:function"``) so that
    the compile-time probes, which run in fresh processes, load exactly the same one.
    """

    def __init__(self, name: str, loader: str) -> None:
        self.name = name
        self.loader = loader
        self._namespace: Any = None
        self._load_error: Exception | None = None

    def namespace(self) -> Any:
        if self._namespace is None and self._load_error is None:
            try:
                self._namespace = load_object(self.loader)()
            except Exception as error:  # remembered: every workload reports it
                self._load_error = error
        if self._load_error is not None:
            raise self._load_error
        return self._namespace

    def cache_env(self, cache_dir: Path, warm: bool) -> dict[str, str]:
        """Environment of a compile probe: which persistent compile cache it may use."""
        raise NotImplementedError

    def runner(self, workload, args, quick, scratch):
        ns = self.namespace()
        if isinstance(workload, CompileWorkload):
            return self._probe_runner(workload, quick, scratch)
        fn = ns.jit(workload.jax_style(ns))
        device_args = tree_map(ns.numpy.asarray, args)
        ns.block_until_ready(device_args)
        sample = timed_calls(fn, device_args, ns.block_until_ready, workload.calls_per_sample(quick))
        return Runner(sample, lambda out: tree_map(np.asarray, out))

    def _probe_runner(self, workload: CompileWorkload, quick: bool, scratch: Path) -> Runner:
        """Each sample is a new process. For the warm variant every process shares one
        cache directory, which the first (untimed, checked) call populates."""
        def new_cache() -> Path:
            return Path(tempfile.mkdtemp(prefix=f"{self.name}-cache-", dir=scratch))

        shared_cache = new_cache() if workload.warm else None

        def sample() -> tuple[float, Any]:
            cache = shared_cache or new_cache()
            env = dict(os.environ, **self.cache_env(cache, workload.warm))
            env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
            command = [sys.executable, "-m", "ember.bench.compile_probe", self.loader,
                       workload.source.name] + (["--quick"] if quick else [])
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=PROBE_TIMEOUT_S)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or ["(no output)"]
                raise RuntimeError(f"compile probe failed: {lines[-1]}")
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            return measured["seconds"], measured["loss"]

        return Runner(sample, np.asarray)


class EmberPeer(JaxStylePeer):
    def __init__(self, backend: str | None = None,
                 loader: str = "ember.bench.peers:load_ember") -> None:
        super().__init__("ember", loader)
        self.backend = backend

    def namespace(self) -> Any:
        first_load = self._namespace is None
        ns = super().namespace()
        if first_load and self.backend is not None:
            from ember.config import config
            config.update("backend", self.backend)
        return ns

    def cache_env(self, cache_dir, warm):
        env = {"EMBER_CACHE_DIR": str(cache_dir)}
        if self.backend is not None:
            env["EMBER_BACKEND"] = self.backend
        return env


class JaxPeer(JaxStylePeer):
    def __init__(self) -> None:
        super().__init__("jax", "ember.bench.peers:load_jax")

    def cache_env(self, cache_dir, warm):
        if not warm:
            return {"JAX_ENABLE_COMPILATION_CACHE": "false"}
        return {
            "JAX_ENABLE_COMPILATION_CACHE": "true",
            "JAX_COMPILATION_CACHE_DIR": str(cache_dir),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        }


class NumPyPeer(Peer):
    """NumPy runs the oracle's own code in float32: eager, one library call per op."""

    name = "numpy"

    def runner(self, workload, args, quick, scratch):
        if isinstance(workload, CompileWorkload):
            raise Unavailable("NumPy compiles nothing")
        sample = timed_calls(workload.reference, args, lambda out: None,
                             workload.calls_per_sample(quick))
        return Runner(sample, lambda out: out)


class TorchPeer(Peer):
    """PyTorch on the CPU, eager or through ``torch.compile`` (default backend: inductor)."""

    def __init__(self, compiled: bool) -> None:
        self.compiled = compiled
        self.name = "torch.compile" if compiled else "torch"

    def runner(self, workload, args, quick, scratch):
        if isinstance(workload, CompileWorkload):
            raise Unavailable("compile time is measured for Ember and JAX only")
        try:
            import torch
        except ImportError as error:
            raise Unavailable(f"torch is not installed ({error})") from error
        fn = workload.torch_impl(torch)
        if self.compiled:
            fn = torch.compile(fn)
        tensors = tree_map(torch.from_numpy, args)
        sample = timed_calls(fn, tensors, lambda out: None, workload.calls_per_sample(quick))
        if self.compiled:
            try:
                sample()  # compiles; a failure here means torch.compile does not work here
            except Exception as error:
                raise Unavailable(f"skipped: torch.compile failed: {describe_error(error)}") from error
        return Runner(sample, lambda out: tree_map(lambda t: t.detach().numpy(), out))


def describe_error(error: BaseException) -> str:
    """One line: the exception's type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def default_peers(backend: str | None) -> list[Peer]:
    return [EmberPeer(backend), NumPyPeer(), JaxPeer(), TorchPeer(compiled=False),
            TorchPeer(compiled=True)]
