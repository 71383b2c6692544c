"""Code generation shared by every native backend.

The stages after fusion (``ember.passes.fusion``; the whole list is in
``ember.compiler.pipeline``) are:

    schedule group ──lower.py──▶ Kernel (kernel_ir.py) ──renderer──▶ source text

- ``indexing.py``: index expressions (affine forms over loop variables, with floor
  division and modulo for reshapes), canonical so equal indices compare equal.
- ``access.py``: where each fusible primitive reads its operands (views are index maps).
- ``kernel_ir.py``: the kernel IR: ``Loop``, ``Let`` (scalar temporaries), ``Load`` /
  ``Store`` with index expressions, accumulators (``AccInit`` / ``AccUpdate`` /
  ``AccFinish``).
- ``lower.py``: a fused loop group → one ``Kernel``: nodes hash-consed per position,
  reductions in phases inside a row loop, adjacent contiguous axes merged into one loop,
  parallel / SIMD flags, loop-invariant values hoisted.
- ``gather.py``: where gather, scatter and the dynamic slices read or write: positions
  with data-dependent starts, clamped; which axes of a scatter may run in parallel.
- ``dynamic.py``: those positions as nodes (an int64 ``offset`` of a ``Load`` or
  ``Store``), and one iteration of a scatter's or a scan's own loops, which ``lower.py``
  plans and emits after the group's loops (``sequential`` loops keep their order).
- ``gemm.py``: ``dot_general`` as (batched) GEMM plans over strided operands.
- ``kernel_text.py``: the kernel IR as text (what ``EMBER_DUMP`` writes).
- ``render.py``: ``Renderer``, all rendering logic, driven by tables.
- ``c.py``: ``CRenderer``, the C11 + OpenMP tables (the CPU backend); ``c_gemm.py`` its
  BLAS calls and ``c_sort.py`` its sorts, which ``ember.compiler.c_module`` puts into one
  C module with the kernels and the entry point.
- ``gpu.py``: ``GpuRenderer``, loops mapped onto threads and a tiled GEMM kernel, shared
  by ``cuda.py`` (CUDA C) and ``opencl.py`` (OpenCL C).

A target is a ``Renderer`` subclass that fills in:

- ``storage_types`` / ``compute_types``: dtype name → type of buffer elements and of
  temporaries (half precision may be computed in float);
- ``op_templates``: op → template, or {dtype class ('float', 'int', 'uint', 'bool',
  'any') → template}; ``{0}``, ``{1}`` are operands, ``{T}`` the compute type, ``{U}``
  the same-width unsigned type, ``{BITS}``, ``{MIN}`` / ``{MAX}``, ``{f_<name>}`` the
  target's math function for the dtype (via ``math_function``);
- ``conversions``: (from class, to class) → template; ``load_templates`` /
  ``store_templates``: dtype → wrapper of a loaded / stored value;
- hooks: ``kernel_header`` (signature: C ``static void k(T *restrict b0, ...)``, CUDA
  ``extern "C" __global__ void k(T *__restrict__ b0, ...)``, OpenCL ``__kernel void
  k(__global T *restrict b0, ...)``), ``loop_header`` (C: OpenMP pragmas + ``for``; a
  GPU target maps ``Loop.parallel`` loops to thread indices and keeps the rest as
  ``for``), ``math_function``, ``float_literal``.

``Renderer.supports(op, dtype)`` tells fusion which equations the target can compute;
everything else runs as a host call. The lowering, the kernel IR and the fusion
decisions are the same for every target.
"""
