"""``platform_dependent``: the branch written for the platform the program runs on, as
``jax.lax.platform_dependent`` (chosen when the program is traced, for the backend it
will run on: Ember compiles a program for one backend)."""
from __future__ import annotations

from typing import Any, Callable

from ember.errors import EmberValueError

__all__ = ["platform_dependent"]

# Backends that answer to another platform's name where no branch names them.
_ALSO = {"reference": "cpu"}


def platform_dependent(*args: Any, default: Callable | None = None,
                       **per_platform: Callable) -> Any:
    """``per_platform[platform](*args)`` for the platform of the default backend ('cpu',
    'cuda', 'opencl'; the reference backend counts as 'cpu' unless a 'reference' branch
    is given), else ``default(*args)``."""
    from ember.runtime.devices import default_backend

    platform = default_backend().name
    branch = per_platform.get(platform) or per_platform.get(_ALSO.get(platform, platform))
    if branch is None:
        branch = default
    if branch is None:
        raise EmberValueError(f"platform_dependent has no branch for platform {platform!r} "
                              f"(branches: {sorted(per_platform)}); add {platform}=... or "
                              f"default=...")
    return branch(*args)
