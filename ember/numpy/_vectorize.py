"""``vectorize``: a function of scalars (or, with a gufunc ``signature``, of core
dimensions) applied over the broadcast leading dimensions of its arguments.

As ``jax.numpy.vectorize`` the loop is ``ember.vmap``, one level per broadcast
dimension, so the function is traced once and the result works under jit and grad.
Arguments of size 1 along a loop dimension are not broadcast (they enter that level
unmapped), and non-excluded keyword arguments are vectorized like positional ones (as
NumPy), after them.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Collection

from ember.errors import EmberTypeError, EmberValueError, user_errors
from ember.numpy._manipulation import squeeze
from ember.numpy._promotion import broadcast_shapes, ensure_array

__all__ = ["vectorize"]

CoreDims = tuple[str, ...]
_ARGUMENT = r"\((?:\w+(?:,\w+)*)?\)"
_ARGUMENTS = rf"{_ARGUMENT}(?:,{_ARGUMENT})*"
_SIGNATURE = re.compile(rf"{_ARGUMENTS}->{_ARGUMENTS}")


def _parse_signature(signature: str) -> tuple[list[CoreDims], list[CoreDims]]:
    """``"(m,n),(n)->(m)"`` as ``[("m", "n"), ("n",)]`` and ``[("m",)]``."""
    compact = re.sub(r"\s+", "", signature)
    if not _SIGNATURE.fullmatch(compact):
        raise EmberValueError(f"vectorize: {signature!r} is not a gufunc signature such as "
                              "'(m,n),(n)->(m)'")
    inputs, outputs = compact.split("->")
    return _core_dims(inputs), _core_dims(outputs)


def _core_dims(text: str) -> list[CoreDims]:
    return [tuple(name for name in group.split(",") if name)
            for group in re.findall(r"\((.*?)\)", text)]


def _bind_static(func: Callable, excluded: Collection[int | str], args: tuple,
                 kwargs: dict) -> tuple[Callable, list[Any]]:
    """``func`` of the vectorized arguments only, and those arguments: excluded ones (and
    ``None``s) are passed through unchanged, other keywords follow the positionals."""
    fixed = {i: a for i, a in enumerate(args) if i in excluded or a is None}
    fixed_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
    names = [k for k in kwargs if k not in excluded]
    dynamic = [a for i, a in enumerate(args) if i not in fixed] + [kwargs[k] for k in names]
    positional = len(dynamic) - len(names)

    def bound(*values: Any) -> Any:
        call_args = list(values[:positional])
        for index in sorted(fixed):
            call_args.insert(index, fixed[index])
        return func(*call_args, **fixed_kwargs, **dict(zip(names, values[positional:])))

    return bound, dynamic


def _core_sizes(arrays: list[Any], core: list[CoreDims]) -> dict[str, int]:
    """The size of every named core dimension; an error where inputs disagree."""
    sizes: dict[str, int] = {}
    for position, (x, dims) in enumerate(zip(arrays, core)):
        if x.ndim < len(dims):
            raise EmberValueError(f"vectorize: argument {position} of shape {tuple(x.shape)} has "
                                  f"fewer dimensions than its core dimensions {dims}")
        for name, size in zip(dims, x.shape[x.ndim - len(dims):]):
            if sizes.setdefault(name, size) != size:
                raise EmberValueError(f"vectorize: core dimension {name!r} is {sizes[name]} in "
                                      f"one argument and {size} in argument {position} (shape "
                                      f"{tuple(x.shape)})")
    return sizes


def _checked(func: Callable, sizes: dict[str, int], outputs: list[CoreDims] | None) -> Callable:
    """``func`` returning arrays, whose core shapes are checked against the signature."""

    def core(*values: Any) -> Any:
        result = func(*values)
        many = isinstance(result, tuple)
        results = [ensure_array(r) for r in (result if many else (result,))]
        if outputs is not None:
            if len(results) != len(outputs):
                raise EmberValueError(f"vectorize: the signature names {len(outputs)} outputs, "
                                      f"the function returned {len(results)}")
            known = dict(sizes)
            for r, dims in zip(results, outputs):
                if r.ndim != len(dims) or any(known.setdefault(n, s) != s
                                              for n, s in zip(dims, r.shape)):
                    raise EmberValueError(f"vectorize: an output of shape {tuple(r.shape)} does "
                                          f"not match its core dimensions {dims} (sizes "
                                          f"{known})")
        return tuple(results) if many else results[0]

    return core


def _map_over_loops(core: Callable, arrays: list[Any], core_dims: list[CoreDims]) -> Any:
    """``core`` applied over the broadcast loop dimensions: one vmap per dimension, each
    argument mapped where it has that dimension (size > 1) and passed whole elsewhere."""
    from ember.transforms.api import vmap

    loops = [tuple(x.shape[:x.ndim - len(d)]) for x, d in zip(arrays, core_dims)]
    shape = broadcast_shapes(*loops)
    squeezed, present = [], []
    for x, loop in zip(arrays, loops):
        ones = tuple(i for i, size in enumerate(loop) if size == 1)
        squeezed.append(squeeze(x, ones) if ones else x)
        present.append((False,) * (len(shape) - len(loop)) + tuple(s != 1 for s in loop))
    mapped = core
    for level in reversed(range(len(shape))):
        in_axes = tuple(0 if p[level] else None for p in present)
        mapped = vmap(mapped, in_axes=in_axes, axis_size=shape[level])
    return mapped(*squeezed)


def vectorize(pyfunc: Callable, *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable:
    """``pyfunc`` applied elementwise (or over the core dimensions of ``signature``,
    e.g. ``'(n),(n)->()'``) to broadcast arguments; ``excluded`` positions or keyword
    names are passed through unvectorized."""
    if not callable(pyfunc):
        raise EmberTypeError(f"vectorize needs a function, got {type(pyfunc).__name__}")
    if any(not isinstance(e, (int, str)) or isinstance(e, bool) or
           (isinstance(e, int) and e < 0) for e in excluded):
        raise EmberValueError(f"vectorize: excluded must hold argument positions (>= 0) and "
                              f"keyword names, got {excluded!r}")
    parsed = None if signature is None else _parse_signature(signature)

    @functools.wraps(pyfunc)
    @user_errors
    def vectorized(*args: Any, **kwargs: Any) -> Any:
        func, dynamic = _bind_static(pyfunc, excluded, args, kwargs)
        arrays = [ensure_array(a) for a in dynamic]
        core_dims = [()] * len(arrays) if parsed is None else parsed[0]
        if len(core_dims) != len(arrays):
            raise EmberValueError(f"vectorize: signature {signature!r} takes {len(core_dims)} "
                                  f"arguments, got {len(arrays)}")
        sizes = _core_sizes(arrays, core_dims)
        core = _checked(func, sizes, None if parsed is None else parsed[1])
        return _map_over_loops(core, arrays, core_dims)

    return vectorized
