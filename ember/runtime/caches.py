"""``ember.clear_caches`` and ``ember.live_arrays``, as JAX's."""
from __future__ import annotations

import gc

from ember.config import JAX_PLATFORMS
from ember.runtime.array import Array
from ember.runtime.compile_cache import forget_memory
from ember.runtime.devices import get_backend
from ember.runtime.jit import clear_jit_caches


def clear_caches() -> None:
    """Drop every compilation cache held in memory, as ``jax.clear_caches``: each jitted
    function traces and compiles again on its next call. The persistent compile cache
    on disk is kept (as JAX keeps its own), so that compile finds its native code there
    (each entry is checked again); to build from scratch, point ``ember.config.cache_dir``
    at an empty directory."""
    clear_jit_caches()
    forget_memory()


def live_arrays(platform: str | None = None) -> list[Array]:
    """Every Array alive in this process on the backend ``platform`` ('cpu', 'cuda',
    JAX's 'gpu'...; default: the default backend), not yet deleted or donated, as
    ``jax.live_arrays``.

    Found by walking the objects the garbage collector tracks (which includes every
    Array) rather than by a registry, so that making an array costs nothing more; a
    call takes time in proportion to the objects alive (it is a debugging aid)."""
    backend = get_backend(JAX_PLATFORMS.get(platform, platform) if platform else None)
    # (type(), not isinstance: the latter asks a weak proxy for its __class__, which
    # raises once its object is gone, and other libraries leave such proxies around)
    return [obj for obj in gc.get_objects()
            if issubclass(type(obj), Array) and obj._buffer is not None
            and obj._device.platform == backend.name]
