"""The backends present on this machine, and which one is the default."""
from __future__ import annotations

import functools
import importlib
import warnings

from ember.backends.base import Backend, Device
from ember import config as config_module
from ember.config import config
from ember.errors import BackendUnavailableError

# name -> "module:Class"; imported lazily so a missing toolchain costs nothing.
_BACKENDS = {
    "reference": "ember.backends.reference.backend:ReferenceBackend",
    "cpu": "ember.backends.cpu.backend:CpuBackend",
    "cuda": "ember.backends.cuda.backend:CudaBackend",
    "opencl": "ember.backends.opencl.backend:OpenCLBackend",
}
_PREFERENCE = ("cuda", "cpu", "reference")


@functools.cache
def _load(name: str) -> Backend | None:
    module_name, _, class_name = _BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing.startswith("ember.") and not module_name.startswith(missing):
            raise  # a missing Ember module is a bug, not an absent optional dependency
        return None
    backend = getattr(module, class_name)()
    return backend if backend.is_available() else None


def get_backend(name: str | None = None) -> Backend:
    """The backend called ``name`` (default: ``config.backend`` or the best present)."""
    if name is None:
        return default_backend()
    if name not in _BACKENDS:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; known backends: {', '.join(_BACKENDS)}")
    backend = _load(name)
    if backend is None:
        raise BackendUnavailableError(
            f"backend {name!r} is not available on this machine; present: "
            f"{', '.join(available_backends())}")
    return backend


def available_backends() -> list[str]:
    """Backends with at least one device here (a backend that can only compile, such as
    'cuda' without a GPU, is not listed but still works through ``get_backend``)."""
    return [name for name in _BACKENDS if _load(name) is not None and _load(name).devices()]


config_module.backends_present = available_backends  # for jax_platforms' "cuda,cpu"


@functools.cache
def _best_present() -> str:
    for name in _PREFERENCE:
        if name == "cuda":
            continue  # a GPU is used when asked for; host arrays stay on the host by default
        if _load(name) is not None:
            return name
    return "reference"


_warned_fallback = False


def default_backend() -> Backend:
    global _warned_fallback
    if config.backend:
        return get_backend(config.backend)
    name = _best_present()
    if name == "reference" and not _warned_fallback:
        _warned_fallback = True
        warnings.warn("ember: no C compiler found; using the (slow) reference backend. "
                      "Install gcc or clang for the native CPU backend.", stacklevel=3)
    return get_backend(name)


_HOST_BACKENDS = ("cpu", "reference")  # their devices share the host's memory and cores


def devices(backend: str | None = None) -> list[Device]:
    """Devices of one backend, or of every backend present when ``backend`` is None.

    The host backends ('cpu', 'reference') split the host into
    ``config.num_cpu_devices`` devices, numbered from 0 (as ``jax_num_cpu_devices``).
    """
    if backend is None:
        return [d for name in available_backends() for d in devices(name)]
    chosen = get_backend(backend)
    if chosen.name in _HOST_BACKENDS:
        return [Device(chosen.name, index) for index in range(config.num_cpu_devices)]
    return chosen.devices()


def device_count(backend: str | None = None) -> int:
    """How many devices a backend has (default: the default backend), as
    ``jax.device_count``."""
    return len(devices(backend or default_backend().name))


def local_devices(process_index: int | None = None, backend: str | None = None) -> list[Device]:
    """The devices attached to this process (all of them, on one host), as
    ``jax.local_devices``; ``process_index`` is accepted for JAX's signature: every
    process of a multi-process run sees its own host's devices."""
    del process_index
    return devices(backend or default_backend().name)


def local_device_count(backend: str | None = None) -> int:
    """Devices attached to this process: all of them, on one host."""
    return device_count(backend)


def default_device() -> Device:
    return default_backend().default_device()
