"""The small interface every backend implements (see DESIGN.md, 'A backend')."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ember.codegen.kernel_ir import KernelInfo
from ember.core.primitive import Primitive
from ember.ir.graph import Graph, Literal


@dataclass(frozen=True)
class Device:
    platform: str  # backend name: 'cpu', 'reference', 'cuda', 'opencl'
    id: int = 0
    description: str = ""
    process_index: int = 0  # the process that owns it (ember.distributed)

    def __repr__(self) -> str:
        return f"{self.platform.capitalize()}Device(id={self.id})"

    @property
    def backend(self) -> "Backend":
        from ember.runtime.devices import get_backend

        return get_backend(self.platform)

    def memory_stats(self) -> dict[str, int] | None:
        """Bytes in use on this device and the most in use at once, as JAX's
        ``Device.memory_stats()``; None where arrays are plain host memory (NumPy's)."""
        return self.backend.memory_stats(self)


@dataclass
class Executable:
    """A compiled graph: call it with device buffers, get device buffers back."""

    graph: Graph
    optimized: Graph
    kernels: list[KernelInfo] = field(default_factory=list)
    cost: dict[str, float] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)
    schedule_text: str = ""

    def run(self, buffers: Sequence[Any]) -> list[Any]:
        raise NotImplementedError


def literal_result(atom: Literal) -> np.ndarray:
    """A literal output of a program, as the read-only array every backend returns."""
    array = np.array(atom.value, dtype=atom.aval.dtype)
    array.flags.writeable = False
    return array


class Backend:
    name: str = "?"
    host_memory: bool = True  # buffers are NumPy arrays in host memory

    def is_available(self) -> bool:
        return True

    def devices(self) -> list[Device]:
        return [Device(self.name, 0)]

    def default_device(self) -> Device:
        """The device ``jit`` compiles for and ``device_put(x, name)`` places on (a
        backend that can compile without hardware may return a compile-only device)."""
        return self.devices()[0]

    def put(self, array: np.ndarray, device: Device) -> Any:
        return array

    def to_host(self, buffer: Any) -> np.ndarray:
        return buffer

    def apply_primitive(self, prim: Primitive, buffers: list, params: dict) -> Any:
        """Eager execution of one primitive."""
        raise NotImplementedError

    def compile(self, graph: Graph, donated: Sequence[bool] = ()) -> Executable:
        raise NotImplementedError

    def synchronize(self, buffer: Any) -> None:
        """Wait until ``buffer`` is computed (asynchronous backends override)."""

    def memory_stats(self, device: Device) -> dict[str, int] | None:
        """See ``Device.memory_stats`` (backends that count their memory override)."""
        return None
