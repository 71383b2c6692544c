"""Python's cyclic garbage collector paused while a program is traced and compiled.

A compile allocates hundreds of thousands of small objects (graph nodes, IR, generated
source), so the collector keeps running, and each of its full passes walks every object
the process holds: with a PyTorch model loaded, a third of a second of ResNet-18's
first ``torch.compile`` call (4.3 s) went to it. What a compile leaves behind is
collected after it, by the collector's next pass.
"""
from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

__all__ = ["collection_paused", "pauses_collection"]

Params = ParamSpec("Params")
Result = TypeVar("Result")


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection inside; the collector is on again after, if it was before
    (a pause inside another, or in another thread meanwhile, leaves it to the outer)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def pauses_collection(function: Callable[Params, Result]) -> Callable[Params, Result]:
    """``function`` run with the collector paused."""
    @functools.wraps(function)
    def paused(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        with collection_paused():
            return function(*args, **kwargs)
    return paused
