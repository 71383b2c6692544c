"""Tracing: interpreters that give meaning to ``Primitive.bind``.

As in JAX (see autodidax), each transformation is an interpreter: a ``Trace`` type
whose tracers box values. Active interpreters form a stack of ``MainTrace`` levels; a
primitive applied to tracers is handled by the highest-level trace among its inputs.
Level 0 is eager evaluation. Staging a function into a Graph (jit) installs a
*dynamic* main so every operation, even on constants, lands in the graph.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from ember.core.abstract import ShapedArray
from ember.core.array_ops import ArrayOps
from ember.core.primitive import Primitive
from ember.errors import ConcretizationError, TracerArrayConversionError, TracerLeakError


class MainTrace:
    """One active interpreter: its level on the stack, its Trace type and shared state."""

    def __init__(self, level: int, trace_type: type, global_data: Any = None) -> None:
        self.level = level
        self.trace_type = trace_type
        self.global_data = global_data
        self.alive = True

    def __repr__(self) -> str:
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class Trace:
    def __init__(self, main: MainTrace) -> None:
        self.main = main

    def pure(self, value: Any) -> Any:
        """Box a value that comes from below every active interpreter."""
        raise NotImplementedError

    def lift(self, tracer: "Tracer") -> "Tracer":
        """Box a tracer of a lower-level interpreter."""
        raise NotImplementedError

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        raise NotImplementedError

    def full_raise(self, value: Any) -> "Tracer":
        if not isinstance(value, Tracer):
            return self.pure(value)
        level = self.main.level
        value_main = value._trace.main
        if not value_main.alive:
            raise leaked_tracer_error(value)
        if value_main is self.main:
            return value
        if value_main.level < level:
            return self.lift(value)
        raise TracerLeakError(
            f"a value traced at level {value_main.level} met a transformation at level "
            f"{level}: it escaped the transformation that created it"
        )


class Tracer(ArrayOps):
    """A boxed value seen by an interpreter; behaves like an array in user code."""

    __array_priority__ = 1000
    _trace: Trace

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    def full_lower(self) -> Any:
        return self

    def concrete_value(self) -> Any:
        """A concrete value, if this tracer has one (JVP over eager values does)."""
        raise ConcretizationError(concretization_message(self))

    def creation_site(self) -> str | None:
        return None

    def _concrete(self) -> Any:
        import numpy as np

        return np.asarray(self.concrete_value())

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """A NumPy array only where the value is concrete (JVP of eager values); a traced
        one cannot become one, as in JAX."""
        try:
            value = self._concrete()
        except ConcretizationError:
            raise TracerArrayConversionError(
                f"NumPy needed the values of a traced array {self.aval.describe()} "
                f"(np.asarray, np.array, or a NumPy function on it). Inside ember.jit, "
                f"grad and vmap, call ember.numpy instead of numpy; for values in Python, "
                f"return them from the jitted function or use ember.pure_callback."
            ) from None
        return value if dtype is None else value.astype(dtype)

    def __repr__(self) -> str:
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"


def concretization_message(tracer: Tracer) -> str:
    site = tracer.creation_site()
    where = f" (the value was computed at {site})" if site else ""
    return (
        f"Python needed a concrete value of a traced array {tracer.aval.describe()}{where}. "
        "Inside ember.jit, grad of jit, or vmap, values are abstract: Python `if`, `while`, "
        "`int()`, `float()` or `bool()` cannot look at them. Fixes: use ember.lax.cond / "
        "ember.lax.while_loop / ember.lax.fori_loop for control flow, ember.numpy.where "
        "to select elementwise, or mark the argument static with "
        "ember.jit(f, static_argnums=...)."
    )


def leaked_tracer_error(tracer: Tracer) -> TracerLeakError:
    site = tracer.creation_site()
    where = f", created at {site}," if site else ""
    return TracerLeakError(
        f"a traced value {tracer.aval.describe()}{where} leaked out of the transformation "
        f"({type(tracer._trace).__name__}) that created it, and was used after it ended. "
        "Return values from the transformed function instead of storing them in globals or "
        "on objects (side effects are not traced)."
    )


class EvalTrace(Trace):
    """Level 0: apply primitives to concrete values right away."""

    def pure(self, value: Any) -> Any:
        return value

    lift = pure

    def process_primitive(self, prim: Primitive, values: list, params: dict) -> Any:
        return _eager_apply(prim, values, params)


# How level 0 applies a primitive to concrete values (on their device): the runtime, a
# layer above, hands its dispatch function in (``ember.runtime.dispatch``).
_eager_apply: Callable[[Primitive, list, dict], Any]


def set_eager_apply(apply: Callable[[Primitive, list, dict], Any]) -> None:
    global _eager_apply
    _eager_apply = apply


_trace_stack: list[MainTrace] = [MainTrace(0, EvalTrace)]
_dynamic_trace: MainTrace | None = None


@contextlib.contextmanager
def new_main(trace_type: type, global_data: Any = None) -> Iterator[MainTrace]:
    main = MainTrace(len(_trace_stack), trace_type, global_data)
    _trace_stack.append(main)
    try:
        yield main
    finally:
        _trace_stack.pop()
        main.alive = False


@contextlib.contextmanager
def new_dynamic_main(trace_type: type, global_data: Any = None) -> Iterator[MainTrace]:
    """A main that catches every operation while active, even on constants (staging)."""
    global _dynamic_trace
    saved = _dynamic_trace
    with new_main(trace_type, global_data) as main:
        _dynamic_trace = main
        try:
            yield main
        finally:
            _dynamic_trace = saved


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """Evaluate operations on concrete values now, even while staging a jitted function
    (as ``jax.ensure_compile_time_eval``): they give concrete arrays that Python can
    inspect. Operations on traced values are still traced."""
    global _dynamic_trace
    saved = _dynamic_trace
    _dynamic_trace = None
    try:
        yield
    finally:
        _dynamic_trace = saved


def find_top_trace(values: Sequence[Any]) -> Trace:
    top = _trace_stack[0]
    for value in values:
        if isinstance(value, Tracer):
            main = value._trace.main
            if not main.alive:
                raise leaked_tracer_error(value)
            if main.level > top.level:
                top = main
    if _dynamic_trace is not None and _dynamic_trace.level > top.level:
        top = _dynamic_trace
    return top.trace_type(top)


def full_lower(value: Any) -> Any:
    return value.full_lower() if isinstance(value, Tracer) else value


def bind(prim: Primitive, args: Sequence[Any], params: dict) -> Any:
    return bind_with_trace(prim, find_top_trace(args), args, params)


def bind_with_trace(prim: Primitive, trace: Trace, args: Sequence[Any], params: dict) -> Any:
    """Apply ``prim`` in ``trace`` (at least as high as every argument's)."""
    tracers = [trace.full_raise(arg) for arg in args]
    outs = trace.process_primitive(prim, tracers, params)
    if prim.multiple_results:
        return [full_lower(out) for out in outs]
    return full_lower(outs)


def is_tracing() -> bool:
    """True while any transformation (jit staging, grad, vmap) is active."""
    return len(_trace_stack) > 1
