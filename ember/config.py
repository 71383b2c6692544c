"""Every Ember flag, read in one place.

Each flag has a default, an ``EMBER_<NAME>`` environment variable that overrides it at
import time, and can be changed at run time with ``ember.config.update(name, value)``.
Code elsewhere reads flags as attributes: ``config.backend``, ``config.dump_dir``.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected a boolean (1/0, true/false), got {text!r}")


def _parse_optional_str(text: str) -> str | None:
    return text or None


def _parse_optional_int(text: str) -> int | None:
    return int(text) if text.strip() else None


@dataclass(frozen=True)
class Flag:
    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str

    @property
    def env_var(self) -> str:
        return "EMBER_" + self.name.upper()


FLAGS: dict[str, Flag] = {
    flag.name: flag
    for flag in [
        Flag("backend", None, _parse_optional_str,
             "Default backend: 'cpu', 'reference', 'cuda' or 'opencl'. None picks the best present."),
        Flag("dump_dir", None, _parse_optional_str,
             "Directory that receives the IR after every pass and every generated source file."),
        Flag("cache_dir", None, _parse_optional_str,
             "Directory of the persistent compile cache (default: the user's cache directory)."),
        Flag("log", "", str,
             "Comma-separated log topics: 'compile' prints time per pass and per C compile."),
        Flag("log_level", "WARNING", str, "Level of the 'ember' logger."),
        Flag("debug_nans", False, _parse_bool,
             "Raise at the first operation that produces a NaN, naming it and the user's line."),
        Flag("enable_x64", False, _parse_bool,
             "Keep 64-bit dtypes. Off (as in JAX): float64/int64 become float32/int32."),
        Flag("num_threads", None, _parse_optional_int,
             "Threads used by native CPU kernels (default: all cores)."),
        Flag("num_cpu_devices", 1, int,
             "Devices the host CPU is split into (as jax_num_cpu_devices), for meshes, "
             "shard_map and pmap on one machine."),
        Flag("blas", "auto", str,
             "BLAS linked by native CPU code: 'openblas' (the scipy-openblas32 wheel), "
             "'mkl' (the mkl wheel), or 'auto': MKL where installed, else OpenBLAS."),
        Flag("profile", False, _parse_bool,
             "Compile native CPU programs to count the calls and time of every kernel; "
             "read them with compiled.profile()."),
        Flag("pin_threads", True, _parse_bool,
             "Keep a native CPU call's threads on distinct cores while it runs (off when "
             "OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY is set)."),
        Flag("optimize", True, _parse_bool,
             "Run the optimizing pass pipeline (off: lower the traced graph as is)."),
        Flag("verify", False, _parse_bool,
             "Run the IR verifier after every graph pass (the test suite turns it on)."),
        Flag("sanitize", "", str,
             "Build native code with sanitizers, e.g. 'address,undefined' (debug only)."),
        Flag("cflags", "", str, "Extra flags passed to the C compiler."),
    ]
}


class Config:
    """The live values of all flags; ``ember.config`` is the single instance."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._snapshot: tuple | None = None
        for flag in FLAGS.values():
            raw = os.environ.get(flag.env_var)
            self._set(flag.name, flag.default if raw is None else flag.parse(raw))

    def _set(self, name: str, value: Any) -> None:
        # Flags are also plain attributes: reading one is on every jitted call's path.
        self._values[name] = value
        self.__dict__[name] = value
        self._snapshot = None

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(f"ember.config has no flag {name!r}; flags: {sorted(FLAGS)}")

    def update(self, name: str, value: Any) -> None:
        """Set flag ``name`` to ``value`` for the rest of the process (JAX's spelling of
        a flag, ``jax_<name>``, names the same flag)."""
        if name not in FLAGS and name.startswith("jax_") and name[4:] in FLAGS:
            name = name[4:]
        if name not in FLAGS:
            raise ValueError(f"unknown Ember flag {name!r}; known flags: {sorted(FLAGS)}")
        if isinstance(value, str) and not isinstance(FLAGS[name].default, str):
            value = FLAGS[name].parse(value)
        self._set(name, value)

    @contextlib.contextmanager
    def override(self, **changes: Any) -> Iterator[None]:
        """Temporarily set flags: ``with ember.config.override(enable_x64=True): ...``."""
        saved = {name: self._values[name] for name in changes if name in self._values}
        try:
            for name, value in changes.items():
                self.update(name, value)
            yield
        finally:
            for name, value in saved.items():
                self.update(name, value)

    def log_enabled(self, topic: str) -> bool:
        return topic in {t.strip() for t in str(self.log).split(",")}

    def snapshot(self) -> tuple:
        """The flags that change what a traced or compiled program means (part of cache keys)."""
        if self._snapshot is None:
            self._snapshot = (self.backend, self.enable_x64, self.optimize, self.debug_nans,
                              self.sanitize, self.cflags)
        return self._snapshot


config = Config()
