"""The frameworks a run compares: Ember, NumPy, JAX, PyTorch eager and torch.compile.

A peer turns a workload into a ``Runner``: a callable that performs one timed sample and
returns its time and raw result, plus a way to turn that result into NumPy arrays for
the correctness check. Everything that is not the work itself (converting inputs,
tracing, compiling) happens while the runner is built or on its first call, which the
harness never times.

A peer that is not installed raises ``Unavailable`` and its column says "n/a". Ember is
the subject of the benchmark, so Ember failing to import is an error, not an absence.

On a GPU run (``target.platform``) every peer runs on the card: PyTorch on
``torch.device("cuda")``, JAX on its first GPU, and NumPy is left out: it would time the
host, and at the GPU sizes it would spend much of the run's time budget doing so. The
GPU paths were written without a GPU and have not run on one yet.
"""
from __future__ import annotations

import functools
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

from ember.bench import target
from ember.bench.trees import tree_map
from ember.bench.workloads import CompileWorkload, Workload
from ember.child_process import environment, throwaway_cache

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
    """JAX on the CPU."""
    return _jax_namespace("cpu")


def load_jax_gpu() -> SimpleNamespace:
    """JAX on its first GPU (needs a CUDA-enabled jaxlib)."""
    return _jax_namespace("gpu")


def _jax_namespace(platform: str) -> SimpleNamespace:
    """The environment is set only where the user has not set it. On a GPU, JAX shares
    the card with PyTorch and Ember, so it allocates as it goes instead of taking 75% of
    the memory up front; and it multiplies float32 in float32 as the others do (its GPU
    default is TF32, which the 1e-4 tolerance rejects and the float32 floor does not
    bound)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu" if platform == "cpu" else "cuda,cpu")
    if platform == "gpu":
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
    except ImportError as error:
        raise Unavailable(f"jax is not installed ({error})") from error
    try:
        device = jax.devices(platform)[0]
    except RuntimeError as error:
        raise Unavailable(f"jax has no {platform} device ({describe_error(error)})") from error
    if platform == "gpu":
        jax.config.update("jax_default_matmul_precision", "highest")
    return SimpleNamespace(
        numpy=jax.numpy, nn=jax.nn, jit=jax.jit, grad=jax.grad,
        value_and_grad=jax.value_and_grad, block_until_ready=jax.block_until_ready,
        device_put=functools.partial(jax.device_put, device=device),
    )


class Peer:
    name: str

    def runner(self, workload: Workload | CompileWorkload, args: tuple, sizes: str,
               scratch: Path) -> Runner:
        raise NotImplementedError


class JaxStylePeer(Peer):
    """A framework that runs the JAX-style workloads through a namespace object.

    The namespace comes from a loader named by reference (``"module:function"``) so that
    the compile-time probes, which run in fresh processes, load exactly the same one. Its
    ``device_put`` places a tree of NumPy arrays on the device the framework is measured
    on, where the inputs wait (uploaded, for JAX) before the first call.
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

    def new_cache(self, scratch: Path) -> Path:
        """A compile cache for a compile probe that holds no program: a new, empty
        folder, unless the framework builds libraries of its own once per host."""
        return Path(tempfile.mkdtemp(prefix=f"{self.name}-cache-", dir=scratch))

    def runner(self, workload, args, sizes, scratch):
        ns = self.namespace()
        if isinstance(workload, CompileWorkload):
            return self._probe_runner(workload, sizes, scratch)
        fn = ns.jit(workload.jax_style(ns))
        device_args = ns.device_put(args)
        ns.block_until_ready(device_args)
        sample = timed_calls(fn, device_args, ns.block_until_ready, workload.calls_per_sample(sizes))
        return Runner(sample, lambda out: tree_map(np.asarray, out))

    def _probe_runner(self, workload: CompileWorkload, sizes: str, scratch: Path) -> Runner:
        """Each sample is a new process. For the warm variant every process shares one
        cache directory, which the first (untimed, checked) call populates."""
        shared_cache = self.new_cache(scratch) if workload.warm else None

        def sample() -> tuple[float, Any]:
            cache = shared_cache or self.new_cache(scratch)
            env = environment(**self.cache_env(cache, workload.warm))
            command = [sys.executable, "-m", "ember.bench.compile_probe", self.loader,
                       workload.source.name, "--sizes", sizes]
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
        self._host_libraries: tempfile.TemporaryDirectory | None = None  # new_cache's
        self._libraries: set[Path] = set()  # what it holds once built

    def namespace(self) -> Any:
        first_load = self._namespace is None
        ns = super().namespace()
        if first_load and self.backend is not None:
            from ember.config import config
            config.update("backend", self.backend)
        return ns

    def new_cache(self, scratch):
        """The per-host libraries (the launcher, Ember's GEMM, the BLAS wrapper and the
        BLAS choice's rates: ``host_libraries``) and nothing else, as on a host where Ember
        ran before, and as JAX's wheel brings its runtime compiled: a cold compile is the
        program's. They are built once per run into one folder, from which each probe's
        programs are removed before the next (a copy elsewhere would not do: the keys of
        libraries that link others hold the folder's path)."""
        if target.platform(self.backend) != "cpu":
            return super().new_cache(scratch)
        if self._host_libraries is None:  # (removed with the peer, or at exit)
            self._host_libraries = tempfile.TemporaryDirectory(prefix="ember-host-")
            start = time.perf_counter()
            env = environment(**self.cache_env(Path(self._host_libraries.name), False))
            subprocess.run([sys.executable, "-c", "from ember.backends.cpu.host_libraries "
                            "import prepare; prepare()"], env=env, check=True,
                           timeout=PROBE_TIMEOUT_S)
            print(f"  (Ember's per-host libraries, built once before compile_cold: "
                  f"{time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
            self._libraries = set(Path(self._host_libraries.name).rglob("*"))
        folder = Path(self._host_libraries.name)
        for path in sorted(folder.rglob("*"), reverse=True):  # (files before their folders)
            if path not in self._libraries:
                path.rmdir() if path.is_dir() else path.unlink()
        return folder

    def cache_env(self, cache_dir, warm):
        # (the folders are removed with the run: no library build outlives a probe)
        env = throwaway_cache(cache_dir)
        if self.backend is not None:
            env["EMBER_BACKEND"] = self.backend
        return env


class JaxPeer(JaxStylePeer):
    LOADERS = {"cpu": "ember.bench.peers:load_jax", "gpu": "ember.bench.peers:load_jax_gpu"}

    def __init__(self, platform: str = "cpu") -> None:
        super().__init__("jax", self.LOADERS[platform])

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

    def runner(self, workload, args, sizes, scratch):
        if isinstance(workload, CompileWorkload):
            raise Unavailable("NumPy compiles nothing")
        sample = timed_calls(workload.reference, args, lambda out: None,
                             workload.calls_per_sample(sizes))
        return Runner(sample, lambda out: out)


class TorchPeer(Peer):
    """PyTorch eager or through ``torch.compile`` (default backend: inductor), on ``device``
    ("cpu", or "cuda": its inputs are moved to the card before the first call, and each
    sample waits for the card with ``torch.cuda.synchronize``)."""

    def __init__(self, compiled: bool, device: str = "cpu") -> None:
        self.compiled = compiled
        self.device = device
        self.name = "torch.compile" if compiled else "torch"

    def runner(self, workload, args, sizes, scratch):
        if isinstance(workload, CompileWorkload):
            raise Unavailable("compile time is measured for Ember and JAX only")
        try:
            import torch
        except ImportError as error:
            raise Unavailable(f"torch is not installed ({error})") from error
        device = torch.device(self.device)
        on_gpu = device.type == "cuda"
        if on_gpu and not torch.cuda.is_available():
            raise Unavailable(f"torch {torch.__version__} sees no CUDA device")
        fn = workload.torch_impl(torch)
        if self.compiled:
            fn = torch.compile(fn)
        tensors = tree_map(lambda array: torch.from_numpy(array).to(device), args)
        sync = (lambda out: torch.cuda.synchronize(device)) if on_gpu else (lambda out: None)
        sample = timed_calls(fn, tensors, sync, workload.calls_per_sample(sizes))
        if self.compiled:
            try:
                sample()  # compiles; a failure here means torch.compile does not work here
            except Exception as error:
                raise Unavailable(f"skipped: torch.compile failed: {describe_error(error)}") from error
        return Runner(sample, lambda out: tree_map(lambda t: t.detach().cpu().numpy(), out))


def describe_error(error: BaseException) -> str:
    """One line: the exception's type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def default_peers(backend: str | None) -> list[Peer]:
    """Every framework, on the platform of the Ember backend measured (NumPy: CPU only)."""
    if target.platform(backend) == "gpu":
        return [EmberPeer(backend), JaxPeer("gpu"), TorchPeer(compiled=False, device="cuda"),
                TorchPeer(compiled=True, device="cuda")]
    return [EmberPeer(backend), NumPyPeer(), JaxPeer(), TorchPeer(compiled=False),
            TorchPeer(compiled=True)]
