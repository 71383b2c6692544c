"""Every Ember flag, read in one place.

Each flag has a default, an ``EMBER_<NAME>`` environment variable that overrides it at
import time, and can be changed at run time with ``ember.config.update(name, value)``.
Code elsewhere reads flags as attributes: ``config.backend``, ``config.dump_dir``.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence


_ON_WORDS = ("1", "true", "yes", "on")
_OFF_WORDS = ("0", "false", "no", "off", "")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _ON_WORDS:
        return True
    if lowered in _OFF_WORDS:
        return False
    raise ValueError(f"expected a boolean (1/0, true/false), got {text!r}")


def _parse_optional_str(text: str) -> str | None:
    return text or None


DEFAULT_DUMP_DIR = "ember_dump"  # (in the working directory, as TORCH_COMPILE_DEBUG=1's)


def _parse_dump_dir(text: str) -> str | None:
    """A directory, or a switch (people write ``EMBER_DUMP=1``): on means
    ``DEFAULT_DUMP_DIR``, off no dumps."""
    switch = text.strip().lower()
    if switch in _OFF_WORDS:
        return None
    return DEFAULT_DUMP_DIR if switch in _ON_WORDS else text


def _parse_optional_int(text: str) -> int | None:
    return int(text) if text.strip() else None


SPMD_EXECUTIONS = ("fused", "per_device")


def _parse_spmd_execution(text: str) -> str:
    value = text.strip().lower()
    if value not in SPMD_EXECUTIONS:
        raise ValueError(f"spmd_execution must be one of {SPMD_EXECUTIONS}, got {text!r}")
    return value


@dataclass(frozen=True)
class Flag:
    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str
    env_alias: str | None = None  # a shorter name of its variable, read first (EMBER_DUMP)

    @property
    def env_var(self) -> str:
        return "EMBER_" + self.name.upper()

    def from_environment(self) -> str | None:
        names = [self.env_alias] if self.env_alias else []
        return next((os.environ[n] for n in [*names, self.env_var] if n in os.environ), None)


FLAGS: dict[str, Flag] = {
    flag.name: flag
    for flag in [
        Flag("backend", None, _parse_optional_str,
             "Default backend: 'cpu', 'reference', 'cuda' or 'opencl'. None picks the best present."),
        Flag("dump_dir", None, _parse_dump_dir,
             "Directory that receives every compiler stage of every program: graphs, schedule, "
             "kernel IR, source, build command (EMBER_DUMP, or EMBER_DUMP_DIR; 1 means "
             f"./{DEFAULT_DUMP_DIR}, 0 none).",
             env_alias="EMBER_DUMP"),
        Flag("cache_dir", None, _parse_optional_str,
             "Directory of the persistent compile cache (default: the user's cache directory)."),
        Flag("cache_wait_timeout", 300.0, float,
             "Seconds a process waits for another one (a rank of the same job, say) that "
             "is building the compile-cache entry it needs; then it builds its own copy."),
        Flag("log", "", str,
             "Comma-separated log topics: 'compile' prints the time of every compiler stage."),
        Flag("log_level", "WARNING", str, "Level of the 'ember' logger."),
        Flag("debug_nans", False, _parse_bool,
             "Raise at the first operation that produces a NaN, naming it and the user's line."),
        Flag("disable_jit", False, _parse_bool,
             "Run jitted functions and lax control flow op by op in Python, for "
             "debugging (as jax_disable_jit; ember.disable_jit() for a block)."),
        Flag("enable_x64", False, _parse_bool,
             "Keep 64-bit dtypes. Off (as in JAX): float64/int64 become float32/int32."),
        Flag("num_threads", None, _parse_optional_int,
             "Threads used by native CPU kernels (default: all cores)."),
        Flag("num_cpu_devices", 1, int,
             "Devices the host CPU is split into (as jax_num_cpu_devices), for meshes, "
             "shard_map and pmap on one machine."),
        Flag("spmd_execution", "fused", _parse_spmd_execution,
             "How shard_map runs over a mesh of host CPU devices: 'fused' (one program "
             "over every shard, compiled once, on all cores) or 'per_device' (the "
             "per-device program, compiled once, on one thread per device with its share "
             "of the cores; collectives through shared memory in a fixed order)."),
        Flag("distributed_timeout", 60.0, float,
             "Seconds a process waits for the others at a cross-process collective "
             "(ember.distributed), or a device thread for the others at a collective of "
             "a per_device shard_map, before it raises, naming who did not come."),
        Flag("blas", "auto", str,
             "BLAS linked by native CPU code: 'openblas' (the scipy-openblas32 wheel), "
             "'mkl' (the mkl wheel), 'ember' (Ember's own GEMM, built for the host's "
             "vector ISA), or 'auto': per shape class, whichever of those is installed ran "
             "fastest on this host in a short probe (a vendor by more than 10%; kept in "
             "the compile cache), once "
             "Ember's GEMM is built (in the background on first use); MKL or OpenBLAS "
             "before."),
        Flag("build_at_exit", True, _parse_bool,
             "At exit, hand a per-host library build still running (the launcher, "
             "Ember's GEMM, the BLAS wrapper) to a detached process that finishes it for "
             "the next script. Off for a compile cache removed at exit (a benchmark's or "
             "a test's temporary folder)."),
        Flag("profile", False, _parse_bool,
             "Compile native CPU programs to count the calls and time of every kernel; "
             "read them with compiled.profile()."),
        Flag("pin_threads", True, _parse_bool,
             "Keep a native CPU call's threads on distinct cores while it runs (off when "
             "OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY is set)."),
        Flag("optimize", True, _parse_bool,
             "Run the optimizing pass pipeline (off: lower the traced graph as is)."),
        Flag("verify", False, _parse_bool,
             "Check the program after every compiler stage (the test suite turns it on)."),
        Flag("sanitize", "", str,
             "Build native code with sanitizers, e.g. 'address,undefined' (debug only)."),
        Flag("cflags", "", str, "Extra flags passed to the C compiler."),
    ]
}


class UnknownFlagError(AttributeError, ValueError):
    """An unknown flag name: AttributeError as JAX raises, ValueError as Ember did."""


# JAX's option names -> Ember's flags, so ``config.update("jax_enable_x64", True)`` works.
JAX_NAMES = {"jax_enable_x64": "enable_x64", "jax_debug_nans": "debug_nans",
             "jax_disable_jit": "disable_jit",
             "jax_platforms": "backend", "jax_platform_name": "backend",
             "jax_num_cpu_devices": "num_cpu_devices"}
JAX_PLATFORMS = {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda", "opencl": "opencl",
                  "reference": "reference"}


def _ember_flag(name: str) -> str:
    return JAX_NAMES.get(name, name)


# The backends present, as the runtime finds them: handed over by ``ember.runtime.devices``
# when it loads (config sits below every layer and imports none of them).
backends_present: Callable[[], Sequence[str]] = lambda: ()


def _platform_backend(value: Any) -> str | None:
    """A JAX platforms value ('cpu', 'cuda,cpu') as an Ember backend: the first listed
    one present here (the first listed when none is)."""
    if not value:
        return None
    names = [part.strip().lower() for part in str(value).split(",") if part.strip()]
    unknown = [n for n in names if n not in JAX_PLATFORMS]
    if unknown:
        raise ValueError(f"unknown platform {unknown[0]!r} in jax_platforms={value!r}; "
                         f"Ember knows {sorted(JAX_PLATFORMS)}")
    present = backends_present()
    backends = [JAX_PLATFORMS[n] for n in names]
    return next((b for b in backends if b in present), backends[0])


class Config:
    """The live values of all flags; ``ember.config`` is the single instance."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._snapshot: tuple | None = None
        for flag in FLAGS.values():
            raw = flag.from_environment()
            self._set(flag.name, flag.default if raw is None else flag.parse(raw))

    def _set(self, name: str, value: Any) -> None:
        # Flags are also plain attributes: reading one is on every jitted call's path.
        self._values[name] = value
        self.__dict__[name] = value
        self._snapshot = None

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is not None and _ember_flag(name) in values:
            return values[_ember_flag(name)]
        raise AttributeError(f"ember.config has no flag {name!r}; flags: {sorted(FLAGS)} "
                             f"(and JAX's names {sorted(JAX_NAMES)})")

    def update(self, name: str, value: Any) -> None:
        """Set flag ``name`` (Ember's name, or JAX's: ``jax_enable_x64``) to ``value``
        for the rest of the process."""
        if name in ("jax_platforms", "jax_platform_name"):
            value = _platform_backend(value)
        name = _ember_flag(name)
        if name not in FLAGS:
            raise UnknownFlagError(f"unknown Ember flag {name!r}; known flags: {sorted(FLAGS)} "
                                 f"(and JAX's names {sorted(JAX_NAMES)})")
        if isinstance(value, str):  # as from its variable (checks spmd_execution's value)
            value = FLAGS[name].parse(value)
        self._set(name, value)

    def config_with_absl(self) -> None:
        """As JAX's: define an absl flag for each JAX option (``--jax_enable_x64``), read
        once ``absl.app.run`` has parsed the command line. Without absl installed, the
        ``--jax_*`` arguments of ``sys.argv`` are read now instead."""
        try:
            from absl import app, flags
        except ImportError:
            self.parse_flags_with_absl()
            return
        for name, ember_name in JAX_NAMES.items():
            if name not in flags.FLAGS and name != "jax_platform_name":
                define = flags.DEFINE_bool if FLAGS[ember_name].parse is _parse_bool \
                    else flags.DEFINE_string
                define(name, None, FLAGS[ember_name].help)
        app.call_after_init(lambda: self._read_absl(flags.FLAGS))

    def parse_flags_with_absl(self) -> None:
        """As JAX's: apply the ``--jax_*`` arguments of ``sys.argv`` (before any ``--``):
        ``--jax_enable_x64``, ``--jax_enable_x64=false``, ``--jax_platforms=cpu``.
        Parses once per process; needs no absl."""
        if self.__dict__.get("_parsed_argv"):
            return
        self.__dict__["_parsed_argv"] = True
        for argument in itertools.takewhile(lambda a: a != "--", sys.argv[1:]):
            name, has_value, text = argument[2:].partition("=")
            if argument.startswith("--jax") and name in JAX_NAMES:
                self.update(name, text if has_value else "true")

    def _read_absl(self, absl_flags: Any) -> None:
        for name in JAX_NAMES:
            if name in absl_flags and absl_flags[name].present:
                self.update(name, absl_flags[name].value)

    @contextlib.contextmanager
    def override(self, **changes: Any) -> Iterator[None]:
        """Temporarily set flags: ``with ember.config.override(enable_x64=True): ...``."""
        saved = {_ember_flag(name): self._values[_ember_flag(name)] for name in changes
                 if _ember_flag(name) in self._values}
        try:
            for name, value in changes.items():
                self.update(name, value)
            yield
        finally:
            for name, value in saved.items():
                self._set(name, value)

    def log_enabled(self, topic: str) -> bool:
        return topic in {t.strip() for t in str(self.log).split(",")}

    def snapshot(self) -> tuple:
        """The flags that change what a traced or compiled program means (part of cache keys)."""
        if self._snapshot is None:
            self._snapshot = (self.backend, self.enable_x64, self.optimize, self.debug_nans,
                              self.sanitize, self.cflags, self.spmd_execution)
        return self._snapshot


config = Config()


# JAX's context managers for its options: ``with ember.enable_x64(): ...``.

def enable_x64(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """64-bit dtypes kept inside the block (``jax.enable_x64``)."""
    return config.override(enable_x64=bool(new_val))


def debug_nans(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """Raise at the first operation that makes a NaN inside the block (``jax.debug_nans``)."""
    return config.override(debug_nans=bool(new_val))


@contextlib.contextmanager
def log_compiles(new_val: bool = True) -> Iterator[None]:
    """Print a line for every program compiled inside the block (``jax.log_compiles``;
    Ember's ``compile`` log topic, which also times each compiler stage)."""
    topics = [t for t in str(config.log).split(",") if t.strip() and t.strip() != "compile"]
    with config.override(log=",".join([*topics, "compile"] if new_val else topics)):
        yield


def disable_jit(disable: bool = True) -> contextlib.AbstractContextManager[None]:
    """Inside the block, jitted functions run their Python op by op, and ``lax.cond``,
    ``switch``, ``while_loop``, ``fori_loop`` and ``scan`` run as Python control flow on
    concrete values (as ``jax.disable_jit``): print and step through them as plain code."""
    return config.override(disable_jit=bool(disable))
