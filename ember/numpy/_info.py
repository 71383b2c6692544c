"""``__array_namespace_info__()``: the Array API inspection object."""
from __future__ import annotations

from typing import Any

from ember.core import dtypes

_KIND_NAMES = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "integral": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KIND_NAMES["numeric"] = (_KIND_NAMES["integral"] + _KIND_NAMES["real floating"]
                          + _KIND_NAMES["complex floating"])


class ArrayNamespaceInfo:
    """Capabilities, devices and dtypes of ``ember.numpy``, as the Array API describes."""

    def capabilities(self) -> dict[str, Any]:
        # Boolean indexing and nonzero / unique need concrete values: their result shape
        # depends on the data, which jit cannot trace.
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": None}

    def default_device(self):
        from ember.runtime.devices import default_device

        return default_device()

    def devices(self) -> list:
        from ember.runtime.devices import devices

        return list(devices())

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        return {"real floating": dtypes.default_float(), "complex floating":
                dtypes.default_complex(), "integral": dtypes.default_int(),
                "indexing": dtypes.default_int()}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        kinds = (kind,) if isinstance(kind, str) or kind is None else tuple(kind)
        names: list[str] = []
        for k in kinds:
            for name in (sum(_KIND_NAMES.values(), ()) if k is None else _KIND_NAMES[k]):
                if name not in names:
                    names.append(name)
        supported = {}
        for name in names:
            dtype = dtypes.to_dtype(name)
            if dtypes.canonicalize(dtype) == dtype:  # 64-bit types only with x64
                supported[name] = dtype
        return supported


def __array_namespace_info__() -> ArrayNamespaceInfo:
    return ArrayNamespaceInfo()
