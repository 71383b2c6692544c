"""``named_call``: a function whose operations carry its name (as ``jax.named_call``)."""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from ember.core.source_info import named_scope

F = TypeVar("F", bound=Callable[..., Any])


def named_call(fun: F, *, name: str | None = None) -> F:
    """``fun``, running under ``named_scope(name or fun.__name__)``."""
    scope = name if name is not None else getattr(fun, "__name__", "call")

    @functools.wraps(fun)
    def named(*args: Any, **kwargs: Any) -> Any:
        with named_scope(scope):
            return fun(*args, **kwargs)

    return named  # type: ignore[return-value]
