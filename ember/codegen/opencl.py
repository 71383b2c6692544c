"""OpenCL C tables for the GPU renderer: what the OpenCL backend builds with clBuildProgram.

The C renderer's op, conversion and half-precision tables apply unchanged: the prelude
gives OpenCL C the ``<stdint.h>`` type names and the ``ember_*`` helpers they call.
OpenCL's math built-ins are overloaded for float and double, so a function keeps its C
name for both. float64 is available when the device has ``cl_khr_fp64``; without it,
float64 equations run as host calls.
"""
from __future__ import annotations

import numpy as np

from ember.codegen.c import COMPUTE_TYPES, RENDERER_ROWS, STORAGE_TYPES
from ember.codegen.gpu import GpuRenderer, integer_power_function
from ember.codegen.render import OpTemplates

_TYPES = """\
typedef char int8_t;
typedef uchar uint8_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef int int32_t;
typedef uint uint32_t;
typedef long int64_t;
typedef ulong uint64_t;
"""

_HALF = """\
inline float ember_f16_to_f32(ushort h) { return vload_half(0, (const __private half *)&h); }
inline ushort ember_f32_to_f16(float f) {
  ushort h;
  vstore_half_rte(f, 0, (__private half *)&h);
  return h;
}
inline float ember_bf16_to_f32(ushort h) { return as_float((uint)h << 16); }
inline ushort ember_f32_to_bf16(float f) {
  uint bits = as_uint(f);
  uint rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  return (ushort)(f != f ? ((bits >> 16) | 0x40u) : rounded);
}
"""

_FP64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"


class OpenCLRenderer(GpuRenderer):
    builtins = {
        "thread": "(int)get_local_id({axis})",
        "block": "get_group_id({axis})",
        "blocks": "get_num_groups({axis})",
        "barrier": "barrier(CLK_LOCAL_MEM_FENCE);",
    }
    kernel_prefix = "__kernel __attribute__((reqd_work_group_size({x}, {y}, {z}))) void"
    global_qualifier = "__global "
    shared_qualifier = "__local"
    max_blocks = 1024  # a CPU device (PoCL) gains nothing from more work-groups
    op_templates = OpTemplates(("opencl", "gpu", "c"), RENDERER_ROWS)
    float_bits = {"float32": ("as_uint({0})", "as_float({0})"),  # OpenCL C's as_<type>
                  "float64": ("as_ulong({0})", "as_double({0})")}

    def __init__(self, fp64: bool = True) -> None:
        super().__init__()
        self.fp64 = fp64
        if not fp64:
            self.storage_types = {k: v for k, v in STORAGE_TYPES.items() if k != "float64"}
            self.compute_types = {k: v for k, v in COMPUTE_TYPES.items() if k != "float64"}
        self.prelude = ((_FP64 if fp64 else "") + _TYPES + _HALF
                        + integer_power_function("inline") + self.helper_functions("inline", fp64))

    def library_function(self, name: str, dtype: np.dtype) -> str:
        return name
