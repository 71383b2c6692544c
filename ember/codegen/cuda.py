"""CUDA C tables for the GPU renderer: what the CUDA backend compiles with NVRTC.

The C renderer's op, conversion and half-precision tables apply unchanged: the prelude
gives NVRTC (which has no standard headers) the ``<stdint.h>`` type names, ``NAN`` /
``INFINITY`` and the ``ember_*`` helpers (half-precision conversions are single PTX
``cvt`` instructions). float32 math calls CUDA's ``expf``-style functions. Block
reductions combine within each warp by shuffles, then across warps in shared memory.
"""
from __future__ import annotations

import numpy as np

from ember.codegen.c import RENDERER_ROWS
from ember.codegen.gpu import BLOCK, THREAD, GpuRenderer, integer_power_function
from ember.codegen.kernel_ir import Accumulator
from ember.codegen.render import OpTemplates

_PRELUDE = """\
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define NAN __int_as_float(0x7fffffff)
#define INFINITY __int_as_float(0x7f800000)
#define EMBER_DEVICE static __device__ __forceinline__

EMBER_DEVICE float ember_f16_to_f32(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
EMBER_DEVICE uint16_t ember_f32_to_f16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
EMBER_DEVICE float ember_bf16_to_f32(uint16_t h) { return __uint_as_float((unsigned)h << 16); }
EMBER_DEVICE uint16_t ember_f32_to_bf16(float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
template <typename T> EMBER_DEVICE T ember_shfl_down(T v, int offset) {
  if constexpr (sizeof(T) < 4) {
    return (T)__shfl_down_sync(0xffffffffu, (int)v, offset);
  } else {
    return __shfl_down_sync(0xffffffffu, v, offset);
  }
}
"""

WARP = 32


class CudaRenderer(GpuRenderer):
    builtins = {
        "thread": "(int)threadIdx.{letter}",
        "block": "blockIdx.{letter}",
        "blocks": "gridDim.{letter}",
        "barrier": "__syncthreads();",
    }
    kernel_prefix = 'extern "C" __global__ void __launch_bounds__({threads})'
    shared_qualifier = "__shared__"
    restrict = "__restrict__"
    warp_size = WARP
    op_templates = OpTemplates(("cuda", "gpu", "c"), RENDERER_ROWS)
    float_bits = {  # CUDA C++ has no compound literals: its bit-reinterpreting intrinsics
        "float32": ("__float_as_uint({0})", "__uint_as_float({0})"),
        "float64": ("((uint64_t)__double_as_longlong({0}))",
                    "__longlong_as_double((long long){0})"),
    }

    def __init__(self) -> None:
        super().__init__()
        self.prelude = (_PRELUDE + integer_power_function("EMBER_DEVICE")
                        + self.helper_functions("EMBER_DEVICE"))

    def library_function(self, name: str, dtype: np.dtype) -> str:
        return name if dtype.name == "float64" else f"{name}f"

    def block_reduction(self, acc: Accumulator) -> list[str]:
        """Shuffles within each warp, one partial per warp through shared memory, then
        shuffles within the first warp; every thread ends with the result."""
        parts = self.components(acc)
        names = [name for name, _, _ in parts]
        warps = BLOCK // WARP
        lines = self._warp_reduce(acc, parts, WARP // 2)
        lines.append(f"if (({THREAD} & {WARP - 1}) == 0) {{ "
                     + " ".join(f"{n}_s[{THREAD} / {WARP}] = {n};" for n in names) + " }")
        lines.append(self.barrier())
        lines.append(f"if ({THREAD} < {WARP}) {{")
        lines += [f"  {n} = {THREAD} < {warps} ? {n}_s[{THREAD}] : {identity};"
                  for n, _, identity in parts]
        lines += ["  " + line for line in self._warp_reduce(acc, parts, warps // 2)]
        lines.append(f"  if ({THREAD} == 0) {{ " + " ".join(f"{n}_s[0] = {n};" for n in names)
                     + " }")
        lines.append("}")
        lines.append(self.barrier())
        lines += [f"{n} = {n}_s[0];" for n in names]
        lines.append(self.barrier())  # the scratch may be reused by the next reduction
        return ["{", *("  " + line for line in lines), "}"]

    def _warp_reduce(self, acc: Accumulator, parts, first_offset: int) -> list[str]:
        names = [name for name, _, _ in parts]
        others = [f"{n}_o" for n in names]
        shuffles = " ".join(f"{ctype} {n}_o = ember_shfl_down({n}, s);"
                            for n, ctype, _ in parts)
        combine = " ".join(self.combine(acc, names, others))
        return [f"for (int s = {first_offset}; s > 0; s >>= 1) {{ {shuffles} {combine} }}"]
