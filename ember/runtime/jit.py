"""``ember.jit``: trace once per signature, compile the whole graph, call the executable.

Inside another transformation (an enclosing jit, grad, vmap) a jitted function is
inlined: the enclosing trace sees its operations directly.

With ``in_shardings`` / ``out_shardings``, arguments that carry a NamedSharding, or a
``with_sharding_constraint`` inside, the traced global program is partitioned over the
mesh (``ember.sharding.partitioner``) before the backend compiles it.
"""
from __future__ import annotations

import functools
import inspect
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ember.backends.base import Backend, Executable, KernelInfo
from ember.config import config
from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.pytree import PyTreeDef, dict_flatten, tree_flatten, tree_unflatten
from ember.core.staging import trace_to_graph
from ember.core.trace import Tracer, is_tracing
from ember.errors import EmberTypeError, EmberValueError
from ember.ir.graph import Graph
from ember.runtime.array import Array, canonical_host
from ember.runtime.collection_pause import pauses_collection
from ember.runtime.devices import get_backend
from ember.runtime.profile import Profile, ProfileRow
from ember.runtime.shape_dtype import ShapeDtypeStruct


def _normalize_argnums(argnums: int | Sequence[int] | None) -> tuple[int, ...]:
    if argnums is None:
        return ()
    if isinstance(argnums, int):
        return (argnums,)
    return tuple(argnums)


def _leaf_aval(leaf: Any) -> ShapedArray:
    if isinstance(leaf, (Array, Tracer)):
        return leaf.aval
    if isinstance(leaf, ShapeDtypeStruct):
        return leaf.aval()
    if dtypes.is_weak_scalar(leaf):
        return ShapedArray((), dtypes.python_scalar_dtype(leaf))
    if isinstance(leaf, (np.ndarray, np.generic)):
        return ShapedArray(np.shape(leaf), dtypes.canonicalize(leaf.dtype))
    if hasattr(leaf, "__array__") or hasattr(leaf, "__dlpack__"):
        array = np.asarray(leaf)
        return ShapedArray(array.shape, dtypes.canonicalize(array.dtype))
    raise EmberTypeError(
        f"argument of type {type(leaf).__name__} is not an array; jitted functions take "
        "arrays, scalars and pytrees (tuples, lists, dicts) of them. Pass other values "
        "with static_argnums / static_argnames.")


@dataclass(frozen=True)
class _Signature:
    treedef: PyTreeDef
    avals: tuple[ShapedArray, ...]
    statics: tuple[Hashable, ...]
    backend: str
    flags: tuple
    shardings: tuple = ()


def _check_static(value: Any, name: str) -> Hashable:
    try:
        hash(value)
    except TypeError:
        raise EmberValueError(
            f"static argument {name} of type {type(value).__name__} is not hashable; static "
            "arguments are part of the compile-cache key. Pass a tuple instead of a list, or "
            "make it a regular (traced) argument.") from None
    return value


class Jitted:
    """The result of ``ember.jit(f)``: callable, with ``.lower(*args)`` for AOT inspection."""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(),
                 donate_argnums=(), backend: str | None = None, in_shardings: Any = None,
                 out_shardings: Any = None) -> None:
        # First: update_wrapper copies fun.__dict__, which must not clobber our fields.
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums = _normalize_argnums(static_argnums)
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) \
            else tuple(static_argnames or ())
        self.donate_argnums = _normalize_argnums(donate_argnums)
        self.backend_name = backend
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self._cache: dict[_Signature, "Compiled"] = {}
        # The fast path's programs, by config snapshot, then by _fast_key; the current
        # snapshot's table is found by identity (hashing the snapshot costs a call).
        self._fast_cache: dict[tuple, dict[tuple, "Compiled"]] = {}
        self._fast_table: tuple[tuple | None, dict] = (None, {})
        self._signature = _safe_signature(fun)
        _every_jitted.add(self)

    # --- splitting arguments into static and traced --------------------------------
    def _split(self, args: tuple, kwargs: dict):
        if self._signature is not None and self.static_argnames:
            for name in self.static_argnames:
                if name not in kwargs and name in self._signature.parameters:
                    index = list(self._signature.parameters).index(name)
                    if index < len(args):  # given positionally: treat it as static too
                        self.static_argnums = tuple(sorted({*self.static_argnums, index}))
        statics = []
        dynamic_args = []
        for i, arg in enumerate(args):
            if i in self.static_argnums or i - len(args) in self.static_argnums:
                statics.append(("arg", i, _check_static(arg, f"#{i}")))
            else:
                dynamic_args.append(arg)
        dynamic_kwargs = {}
        for name, value in sorted(kwargs.items()):
            if name in self.static_argnames:
                statics.append(("kw", name, _check_static(value, repr(name))))
            else:
                dynamic_kwargs[name] = value
        return tuple(statics), (tuple(dynamic_args), dynamic_kwargs)

    def _rebuild_call(self, statics, dynamic):
        args, kwargs = dynamic
        args = list(args)
        for kind, key, value in statics:
            if kind == "arg":
                args.insert(key, value)
            else:
                kwargs = {**kwargs, key: value}
        return args, kwargs

    # --- calling --------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if config.disable_jit:
            return self.fun(*args, **kwargs)
        # Fast path: positional arguments that are Ember or NumPy arrays, or tuples, lists
        # and dicts of them, with a signature seen before. This skips building the pytree
        # structure, which dominates the cost of calling a small function.
        if not kwargs and not self.static_argnums and not is_tracing():
            found = _fast_key(args)
            if found is not None:
                snapshot, table = self._fast_table
                if snapshot is not config.snapshot():
                    table = self._fast_table_of(config.snapshot())
                compiled = table.get(found[0])
                if compiled is not None:
                    return compiled._call_arrays(found[1])
        return self._call_general(args, kwargs)

    def _fast_table_of(self, snapshot: tuple) -> dict[tuple, "Compiled"]:
        table = self._fast_cache.setdefault(snapshot, {})
        self._fast_table = (snapshot, table)  # (one assignment: threads see a pair)
        return table

    def _call_general(self, args: tuple, kwargs: dict) -> Any:
        if is_tracing():
            return self._inline(args, kwargs)
        statics, dynamic = self._split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        if any(isinstance(leaf, Tracer) for leaf in leaves):
            return self._inline(args, kwargs)
        avals = tuple(_leaf_aval(leaf) for leaf in leaves)
        backend = get_backend(self.backend_name or _committed_backend(leaves))
        shardings = _arg_shardings(leaves)
        key = _Signature(treedef, avals, statics, backend.name, config.snapshot(), shardings)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._lower(statics, treedef, avals, backend, shardings).compile()
            compiled.commits = self.backend_name is not None
            self._cache[key] = compiled
        fast = _fast_key(args) if not kwargs and not statics else None
        if fast is not None:
            self._fast_table_of(config.snapshot())[fast[0]] = compiled
        return compiled._call_flat(leaves)

    def _inline(self, args: tuple, kwargs: dict) -> Any:
        """Inside another trace the enclosing one sees the operations; in_shardings and
        out_shardings become sharding constraints on the arguments and results there."""
        if self.in_shardings is None and self.out_shardings is None:
            return self.fun(*args, **kwargs)
        from ember.sharding.partitioner.jit_program import constrained_call

        statics, (dynamic_args, dynamic_kwargs) = self._split(args, kwargs)

        def call(*positional: Any) -> Any:
            call_args, call_kwargs = self._rebuild_call(statics, (positional, dynamic_kwargs))
            return self.fun(*call_args, **call_kwargs)

        return constrained_call(call, dynamic_args, self.in_shardings, self.out_shardings)

    def lower(self, *args: Any, **kwargs: Any) -> "Lowered":
        statics, dynamic = self._split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        avals = tuple(_leaf_aval(leaf) for leaf in leaves)
        return self._lower(statics, treedef, avals, get_backend(self.backend_name),
                           _arg_shardings(leaves))

    @pauses_collection
    def _lower(self, statics, treedef: PyTreeDef, avals, backend: Backend,
               arg_shardings: tuple = ()) -> "Lowered":
        out_tree_box: list[PyTreeDef] = []

        def flat_fun(*flat_args):
            dynamic = tree_unflatten(treedef, flat_args)
            call_args, call_kwargs = self._rebuild_call(statics, dynamic)
            out = self.fun(*call_args, **call_kwargs)
            out_leaves, out_tree = tree_flatten(out)
            for leaf in out_leaves:
                _check_output(leaf, self.fun)
            out_tree_box.append(out_tree)
            return out_leaves

        retrace = lambda avals: trace_to_graph(flat_fun, list(avals))  # noqa: E731
        start = time.perf_counter()
        annotated = self.in_shardings is not None or self.out_shardings is not None
        if arg_shardings or annotated:
            from ember.sharding.partitioner.jit_program import trace_sharded

            graph, partition = trace_sharded(retrace, avals, arg_shardings, annotated)
        else:  # (a sharding constraint inside may still ask for partitioning)
            graph, partition = retrace(avals), True
        if config.log_enabled("compile"):
            print(f"ember: traced {getattr(self.fun, '__name__', 'fn')} in "
                  f"{time.perf_counter() - start:.4f} s")
        donated = self._donated_mask(treedef)
        name = getattr(self.fun, "__name__", "fn")
        partitioned = None
        if partition:
            partitioned = self._partition(graph, treedef, out_tree_box[-1], arg_shardings,
                                          name)
        if partitioned is not None:
            graph, partitioned = partitioned
        return Lowered(graph, treedef, out_tree_box[-1], backend, donated, name, partitioned)

    def _partition(self, graph: Graph, treedef: PyTreeDef, out_tree: PyTreeDef,
                   arg_shardings: tuple, name: str):
        from ember.sharding.partitioner.jit_program import partition_jit, wants_partitioning

        shardings = arg_shardings or (None,) * len(graph.inputs)
        if not wants_partitioning(graph, shardings, self.in_shardings, self.out_shardings):
            return None
        return partition_jit(graph, treedef, out_tree, shardings, self.in_shardings,
                             self.out_shardings, name)

    def _donated_mask(self, treedef: PyTreeDef) -> tuple[bool, ...]:
        if not self.donate_argnums:
            return ()
        args_def = treedef.children[0]  # (args tuple, kwargs dict)
        mask: list[bool] = []
        dynamic_positions = [i for i in range(len(args_def.children) + len(self.static_argnums))
                             if i not in self.static_argnums]
        for position, child in zip(dynamic_positions, args_def.children):
            mask.extend([position in self.donate_argnums] * child.num_leaves)
        mask.extend([False] * treedef.children[1].num_leaves)
        return tuple(mask)

    def clear_cache(self) -> None:
        self._cache.clear()
        self._fast_cache.clear()
        self._fast_table = (None, {})

    def _cache_size(self) -> int:
        return len(self._cache)


# Every jitted function alive, so that ``ember.clear_caches`` reaches their caches.
_every_jitted: "weakref.WeakSet[Jitted]" = weakref.WeakSet()


def clear_jit_caches() -> None:
    """Empty the compiled-program caches of every jitted function alive."""
    for jitted in list(_every_jitted):
        jitted.clear_cache()


def _safe_signature(fun: Callable):
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _fast_key(args: tuple) -> tuple[tuple, list] | None:
    """``(key, leaves)`` when ``args`` is a pytree of tuples, lists, dicts and None over
    concrete Ember Arrays and NumPy arrays, else None. The key holds the structure and
    each leaf's aval (with the device of committed Arrays; NumPy arrays by shape and
    dtype: the config, part of the cache key, fixes the dtype they become); the leaves
    come in ``tree_flatten``'s order."""
    key: list = [len(args)]
    leaves: list = []
    for arg in args:
        if type(arg) is Array:  # (the common case, inline: this is the per-call cost)
            key.append((arg.aval, arg._device, arg._sharding) if arg.committed else arg.aval)
            leaves.append(arg)
        elif not _fast_items(arg, key, leaves):
            return None
    return tuple(key), leaves


def _fast_items(tree: Any, key: list, leaves: list) -> bool:
    kind = type(tree)
    if kind is Array:
        key.append((tree.aval, tree._device, tree._sharding) if tree.committed else tree.aval)
        leaves.append(tree)
    elif kind is np.ndarray:
        key.append((tree.shape, tree.dtype))
        leaves.append(tree)
    elif kind is tuple or kind is list or kind is dict:
        if kind is dict:
            try:
                items, names = dict_flatten(tree)
            except TypeError:  # keys that do not sort
                return False
            key.append((dict, names))
        else:
            items = tree
            key.append((kind, len(tree)))
        for item in items:
            if not _fast_items(item, key, leaves):
                return False
    elif tree is None:
        key.append(None)
    else:
        return False
    return True


def _arg_shardings(leaves: Sequence[Any]) -> tuple:
    """The NamedSharding each argument carries (None for the others), or () if none."""
    found = tuple(leaf._sharding if isinstance(leaf, Array) else None for leaf in leaves)
    return found if any(s is not None for s in found) else ()


def _committed_backend(leaves: Sequence[Any]) -> str | None:
    """The backend of the committed array arguments (None: the default backend)."""
    devices = {leaf.device for leaf in leaves if isinstance(leaf, Array) and leaf.committed}
    if len(devices) > 1:
        raise EmberValueError(
            f"arguments committed to different devices ({', '.join(map(str, devices))}); "
            "move them with ember.device_put(x, device) or pass jit(..., backend=...)")
    return devices.pop().platform if devices else None


def _check_output(leaf: Any, fun: Callable) -> None:
    if isinstance(leaf, (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex)):
        return
    raise EmberTypeError(
        f"{getattr(fun, '__name__', 'the function')} returned a value of type "
        f"{type(leaf).__name__}, which is not an array; jitted functions must return "
        "arrays, scalars, or pytrees (tuples, lists, dicts, None) of them.")


class Lowered:
    """A traced, not yet optimized program (``ember.jit(f).lower(*args)``)."""

    def __init__(self, graph: Graph, in_tree: PyTreeDef, out_tree: PyTreeDef,
                 backend: Backend, donated: tuple[bool, ...], name: str,
                 partitioned: Any = None) -> None:
        self.graph = graph
        self.partitioned = partitioned  # a PartitionedJit, or None
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.backend = backend
        self.donated = donated
        self.name = name

    def as_text(self, source: bool = True) -> str:
        return self.graph.pretty_print(source=source)

    @pauses_collection
    def compile(self) -> "Compiled":
        device = self.backend.default_device()
        graph = self.graph.replace(constvals=[_const_buffer(v, device) for v in self.graph.constvals])
        start = time.perf_counter()
        executable = self.backend.compile(graph, self.donated)
        elapsed = time.perf_counter() - start
        if config.log_enabled("compile"):
            print(f"ember: compiled {self.name} for {self.backend.name} in {elapsed:.4f} s")
        return Compiled(executable, self.in_tree, self.out_tree, device, self.donated,
                        self.partitioned)


def _const_buffer(value: Any, device) -> Any:
    if isinstance(value, Array):
        if value.device == device:
            return value.live_buffer()
        return device.backend.put(value._host(), device)
    return device.backend.put(canonical_host(value), device)


class Compiled:
    """An executable plus what a user may inspect about it."""

    def __init__(self, executable: Executable, in_tree: PyTreeDef, out_tree: PyTreeDef,
                 device, donated: tuple[bool, ...], partitioned: Any = None) -> None:
        self.executable = executable
        self.partitioned = partitioned  # a PartitionedJit, or None
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.device = device
        self.donated = donated
        self._out_avals = executable.graph.out_avals
        self._single_output = out_tree.node_type is None
        self.commits = False  # results are committed to the device (jit with backend=...)
        self._in_avals = executable.graph.in_avals
        self._backend = device.backend
        # (the fast path hands Arrays' buffers over as they are: not when the program
        # takes blocks of whole values, nor when it checks for NaNs)
        self._whole_values = partitioned is not None and partitioned.view is not None

    @property
    def kernels(self) -> list[KernelInfo]:
        return self.executable.kernels

    def as_text(self, source: bool = True) -> str:
        """The optimized program (and its schedule); for a partitioned program, first
        the per-device SPMD program and every collective the partitioner inserted, with
        the user's line and the conflict of shardings that caused it."""
        text = self.executable.optimized.pretty_print(source=source)
        if self.executable.schedule_text:
            text += "\n\n" + self.executable.schedule_text
        if self.partitioned is not None:
            text = self.partitioned.program.as_text(source) + "\n\n" + text
        return text

    @property
    def spmd_program(self):
        """The per-device program of a partitioned jit (an ``SpmdProgram``), or None."""
        return self.partitioned.program if self.partitioned is not None else None

    def cost_analysis(self) -> dict[str, float]:
        """The backend's costs; a partitioned program adds the bytes each device
        sends per call (``"bytes communicated per device"``)."""
        cost = dict(self.executable.cost)
        if self.partitioned is not None:
            cost["bytes communicated per device"] = \
                self.partitioned.program.bytes_communicated()
        return cost

    def memory_analysis(self) -> dict[str, int]:
        return dict(self.executable.memory)

    def profile(self, reset: bool = False) -> Profile:
        """Calls and time of every kernel since the program was compiled (or the last
        ``reset``), for programs compiled with ``ember.config.profile`` on (CPU backend).
        ``print(compiled.profile())`` shows a table, the costliest kernels first."""
        if not hasattr(self.executable, "profile"):
            raise EmberValueError(f"profiling is not available on the "
                                  f"{type(self.executable).__name__} backend")
        counts = self.executable.profile(reset)
        return Profile([ProfileRow(kernel, calls, seconds)
                        for kernel, (calls, seconds) in zip(self.kernels, counts)])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if config.disable_jit:
            return self.fun(*args, **kwargs)
        leaves, treedef = tree_flatten((args, kwargs))
        if treedef != self.in_tree:
            raise EmberTypeError(f"compiled function expects arguments structured as "
                                 f"{self.in_tree}, got {treedef}")
        blocks = leaves if self.partitioned is None else self.partitioned.arguments(leaves)
        for leaf, aval in zip(blocks, self._in_avals):  # (across processes: their blocks)
            if _leaf_aval(leaf) != aval:
                raise EmberTypeError(f"compiled for {aval.describe()}, called with "
                                     f"{_leaf_aval(leaf).describe()}")
        return self._call_flat(leaves)

    def _call_arrays(self, args: Sequence[Any]) -> Any:
        """Call with the leaves of the arguments, Ember Arrays (or NumPy arrays) already
        known to match the compiled signature."""
        device = self.device
        if self._whole_values or config.debug_nans:
            return self._call_flat(list(args))  # whole values are cut to their blocks
        buffers = []
        committed = self.commits
        for arg in args:
            if (type(arg) is not Array or arg._buffer is None
                    or (arg._device is not device and arg._device != device)):
                return self._call_flat(list(args))  # NumPy, transfers, or the donated error
            buffers.append(arg._buffer)
            committed = committed or arg.committed
        outs = self.executable.run(buffers)
        if self.donated:
            _consume_donated(args, self.donated)
        arrays = [Array(buf, aval, device, committed) for buf, aval in zip(outs, self._out_avals)]
        if self.partitioned is not None:
            arrays = self.partitioned.results(arrays)
        if self._single_output:
            return arrays[0]
        return tree_unflatten(self.out_tree, arrays)

    def call_host(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The flat results, as NumPy arrays, of a call with NumPy arrays of the compiled
        shapes and dtypes: the path for a front end that converts its own tensors
        (ember.torch), without Array wrappers or pytrees. On a host-memory backend the
        program reads the arrays in place, and a result that shares memory with one is
        a read-only view of it (the caller copies it before writing)."""
        if (config.debug_nans or self.partitioned is not None or any(self.donated)
                or not self._backend.host_memory):
            results = tree_flatten(self._call_flat(list(arrays)))[0]
            return [r._host() if isinstance(r, Array) else np.asarray(r) for r in results]
        put, device = self._backend.put, self.device
        buffers = [_read_only_view(a) if self._can_borrow(a, aval, position)
                   else put(canonical_host(a, aval.dtype), device)
                   for position, (a, aval) in enumerate(zip(arrays, self._in_avals))]
        return self.executable.run(buffers)

    def call_addresses(self, addresses: Sequence[int]) -> list[np.ndarray] | None:
        """The flat results of a call whose inputs are given by address (a front end's
        own tensors: C-contiguous host memory of the compiled shapes and dtypes, kept
        alive and unchanged by the caller during the call), as fresh NumPy arrays, and
        None for a result that is an argument as it is (``returned_arguments``); None,
        running nothing, where the program cannot take addresses (then ``call_host``)."""
        if config.debug_nans or not self._takes_addresses:
            return None
        return self.executable.run_at(addresses)

    def returned_arguments(self) -> dict[int, int]:
        """{result position: argument position} of the results that ``call_addresses``
        returns as None: arguments returned as they are."""
        return self.executable.returned_arguments() if self._takes_addresses else {}

    @functools.cached_property
    def _takes_addresses(self) -> bool:
        # (an empty input's address may be null)
        return (hasattr(self.executable, "run_at") and self.partitioned is None
                and not any(self.donated) and self._backend.host_memory
                and all(aval.size for aval in self._in_avals))

    def _can_borrow(self, leaf: Any, aval: ShapedArray, position: int) -> bool:
        """A NumPy argument the program may read in place rather than copy: the
        backend runs synchronously on host memory, so the array cannot change while the
        call reads it, and the program will not write it (not donated). Results that
        share its memory are copied after the call (``_unshared``)."""
        return (type(leaf) is np.ndarray and self._backend.host_memory
                and leaf.dtype == aval.dtype and leaf.flags.c_contiguous
                and leaf.flags.aligned
                and not (self.donated and self.donated[position]))

    def _call_flat(self, leaves: list[Any]) -> Any:
        device = self.device
        backend = self._backend
        given = leaves if self.partitioned is None else self.partitioned.arguments(leaves)
        buffers, borrowed = [], []
        for position, (leaf, aval) in enumerate(zip(given, self._in_avals)):
            if isinstance(leaf, Array) and (leaf._device is device or leaf._device == device):
                buffers.append(leaf.live_buffer())
            elif isinstance(leaf, Array):
                buffers.append(backend.put(leaf._host(), device))
            elif self._can_borrow(leaf, aval, position):
                buffers.append(_read_only_view(leaf))
                borrowed.append(leaf)
            else:
                buffers.append(backend.put(canonical_host(leaf, aval.dtype), device))
        outs = self.executable.run(buffers)
        if borrowed:
            outs = [_unshared(out, borrowed) for out in outs]
        if self.donated:
            _consume_donated(leaves, self.donated)
        committed = self.commits or _any_committed(leaves)
        arrays = [Array(buf, aval, device, committed) for buf, aval in zip(outs, self._out_avals)]
        if self.partitioned is not None:
            arrays = self.partitioned.results(arrays)
        if config.debug_nans:
            from ember.runtime.debug import check_nans_in_outputs

            check_nans_in_outputs(self.executable.graph, [backend.to_host(b) for b in buffers],
                                  [a._host() for a in arrays])
        if self._single_output:
            return arrays[0]
        return tree_unflatten(self.out_tree, arrays)


def _any_committed(leaves: Sequence[Any]) -> bool:
    for leaf in leaves:  # (a loop: a generator costs more than the few leaves of a call)
        if isinstance(leaf, Array) and leaf.committed:
            return True
    return False


def _read_only_view(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _unshared(out: Any, borrowed: list[np.ndarray]) -> Any:
    """``out``, copied if it shares memory with an argument the call borrowed (a
    program may return an input as it is; the caller may mutate that array later)."""
    if isinstance(out, np.ndarray):
        for array in borrowed:
            if np.may_share_memory(out, array):
                return out.copy()
    return out


def _consume_donated(leaves: Sequence[Any], donated: Sequence[bool]) -> None:
    """Donated arrays gave their buffers to the program: they cannot be used again."""
    for leaf, is_donated in zip(leaves, donated):
        if is_donated and isinstance(leaf, Array):
            leaf.mark_donated()


def jit(fun: Callable | None = None, *, in_shardings: Any = None, out_shardings: Any = None,
        static_argnums=(), static_argnames=(), donate_argnums=(),
        backend: str | None = None):
    """Compile ``fun`` with Ember's optimizing compiler (usable as a decorator).

    ``in_shardings`` / ``out_shardings`` (as in JAX): a pytree prefix of the positional
    arguments / of the results, of ``NamedSharding``s or ``PartitionSpec``s (under
    ``ember.set_mesh``), None leaving a value to the partitioner. The program is then
    partitioned over the mesh and compiled once for all its devices."""
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, backend=backend)
    if not callable(fun):
        raise EmberTypeError(f"ember.jit expects a function, got {type(fun).__name__}")
    return Jitted(fun, static_argnums, static_argnames, donate_argnums, backend,
                  in_shardings, out_shardings)
