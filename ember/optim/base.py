"""The optimizer protocol and combinators."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ember.core.pytree import tree_map


class GradientTransformation(NamedTuple):
    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]  # (grads, state, params=None) -> (updates, state)


def apply_updates(params: Any, updates: Any) -> Any:
    """``params + updates`` leaf by leaf, keeping each parameter's dtype."""
    return tree_map(lambda p, u: (p + u).astype(p.dtype) if hasattr(p, "dtype") else p + u,
                    params, updates)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply ``transforms`` in order; the state is the tuple of their states."""

    def init(params: Any) -> tuple:
        return tuple(t.init(params) for t in transforms)

    def update(grads: Any, state: tuple, params: Any = None) -> tuple[Any, tuple]:
        new_states = []
        for transform, sub_state in zip(transforms, state):
            grads, sub_state = transform.update(grads, sub_state, params)
            new_states.append(sub_state)
        return grads, tuple(new_states)

    return GradientTransformation(init, update)


def as_schedule(value: float | Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A learning rate given as a number or as a schedule ``step -> rate``."""
    return value if callable(value) else (lambda step: value)
