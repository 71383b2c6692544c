"""How the GPU renderers map the kernel IR onto a grid (no device needed): elementwise
kernels as grid-stride loops over collapsed loop nests, row kernels as a block per row
with block reductions, stores outside spread loops done by one thread, 32- vs 64-bit
indices, launch shapes, and the tiled GEMM's coalesced tile loads."""
from __future__ import annotations

import re

import numpy as np
import pytest
from gpu_programs import softmax

import ember
from ember import lax
from ember.codegen import indexing as ix
from ember.codegen.cuda import CudaRenderer
from ember.codegen.gpu import BLOCK, LaunchShape
from ember.codegen.kernel_ir import Buffer, Kernel, Let, Load, Loop, Store
from ember.codegen.opencl import OpenCLRenderer
from ember.backends.base import Device
from ember.backends.opencl.backend import OpenCLBackend
from ember.compiler.pipeline import compile_program


def program(fun, *args, renderer=None):
    """The device program of ``fun`` (rendering needs no OpenCL device)."""
    graph = ember.jit(fun).lower(*args).graph
    target = OpenCLBackend().target(Device("opencl"), renderer or OpenCLRenderer())
    return compile_program(graph, "opencl", target, until="source").source


def only_kernel(fun, *args, renderer=None):
    built = program(fun, *args, renderer=renderer)
    (step,) = built.steps
    (launch,) = step.launches
    return built.kernels[0].source, launch.shape


def test_an_elementwise_kernel_is_one_grid_stride_loop():
    source, shape = only_kernel(lambda x: x * 2.0 + 1.0, np.ones((300, 1000), np.float32))
    assert "for (int i0 = (int)(get_group_id(0)) * 256 + tid; i0 < 300000; " \
           "i0 += (int)(get_num_groups(0)) * 256)" in source
    assert shape == LaunchShape((min(-(-300000 // BLOCK), OpenCLRenderer.max_blocks), 1, 1),
                                (BLOCK, 1, 1))


def test_a_transposed_view_collapses_its_loop_nest_into_the_grid_loop():
    source, _ = only_kernel(lambda x: x.T * 2.0, np.ones((37, 53), np.float32))
    assert "f_i0 < 1961" in source  # 53 * 37 iterations in one flat loop
    assert "const int i0 = f_i0 / 37;" in source and "const int i1 = (f_i0) % 37;" in source


def test_grids_are_capped_and_walk_the_rest_in_strides():
    _, shape = only_kernel(lambda x: x + 1.0, np.ones(BLOCK * 5000, np.float32))
    assert shape.grid == (OpenCLRenderer.max_blocks, 1, 1)
    _, shape = only_kernel(lambda x: x + 1.0, np.ones(BLOCK * 5000, np.float32),
                           renderer=CudaRenderer())
    assert shape.grid == (5000, 1, 1)


def test_a_row_kernel_takes_a_block_per_row_and_a_thread_per_element():
    source, shape = only_kernel(softmax, np.ones((100, 700), np.float32))
    assert "for (int o0 = (int)(get_group_id(0)); o0 < 100; o0 += (int)(get_num_groups(0)))" \
        in source
    # the max, the sum and the output walk the row thread-strided
    assert len(re.findall(r"for \(int (\w+) = tid; \1 < 700; \1 \+= 256\)", source)) == 3
    assert source.count("__local float acc") == 2 and "__local int acc0_nan_s[256];" in source
    assert shape == LaunchShape((100, 1, 1), (BLOCK, 1, 1))


def test_a_kept_row_holds_only_the_positions_its_thread_visits():
    source, _ = only_kernel(softmax, np.ones((10, 700), np.float32))
    (name,) = re.findall(r"float (s\d+)\[3\];", source)  # 700 / 256 positions per thread
    assert re.search(rf"{name}\[\((\w+)\) / 256\] = t\d+;", source)  # the exps, kept
    assert re.search(rf"= {name}\[\((\w+)\) / 256\];", source)  # and taken back


def test_a_store_outside_the_spread_loops_is_done_by_the_first_thread():
    source, _ = only_kernel(lambda x: lax.reduce_max(x, (1,)), np.ones((6, 50), np.float32))
    assert "if (tid == 0) { b1[o0] = t" in source
    source, shape = only_kernel(lambda x: lax.reduce_sum(x, (0, 1)), np.ones((6, 50), np.float32))
    assert "if (tid == 0) { b1[0] = t" in source
    assert shape.grid == (1, 1, 1)  # a single row: the whole array


def test_cuda_reductions_shuffle_within_warps():
    source, _ = only_kernel(lambda x: lax.argmax(x, 1, np.int32), np.ones((4, 600), np.float32),
                            renderer=CudaRenderer())
    assert "ember_shfl_down(acc0_v, s)" in source and "ember_shfl_down(acc0, s)" in source
    assert "__shared__ float acc0_v_s[8];" in source and "__shared__ int32_t acc0_s[8];" in source


def test_indices_are_32_bit_unless_a_buffer_needs_64():
    sym = ix.Sym("i0", 2 ** 31)
    src, dst = Buffer("b0", np.float32, 2 ** 31), Buffer("b1", np.float32, 2 ** 31)
    dst.written = True
    load = Load(src, ix.var(sym), np.dtype(np.float32))
    load.id, load.source = 0, ""
    kernel = Kernel("big", [src, dst], [Loop(sym, [Let(load), Store(dst, ix.var(sym), load)])])
    source = CudaRenderer().render_kernel(kernel)
    assert "for (int64_t i0 = (int64_t)(blockIdx.x) * 256 + tid; i0 < 2147483648;" in source


@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_tiles_load_along_the_contiguous_axis(transposed):
    a = np.ones((48, 64) if transposed else (64, 48), np.float32)
    b = np.ones((48, 40), np.float32)
    dims = (((0,), (0,)) if transposed else ((1,), (0,)), ((), ()))
    source, shape = only_kernel(lambda a, b: lax.dot_general(a, b, dims), a, b)
    # consecutive threads (e) take consecutive addresses: the 'e %' index is contiguous
    a_load = "q = e / 64, p = e % 64" if transposed else "q = e % 16, p = e / 16"
    a_address = "a[(k0 + q) * 64 + r0 + p]" if transposed else "a[(r0 + p) * 48 + k0 + q]"
    assert a_load in source and a_address in source
    assert "q = e / 64, p = e % 64" in source and "b[(k0 + q) * 40 + c0 + p]" in source
    assert "acc[i][j] = fma(x[i], y[j], acc[i][j]);" in source  # 4 x 4 per thread
    assert shape == LaunchShape((1, 1, 1), (16, 16, 1))  # one 64 x 64 tile of C


def test_without_fp64_float64_is_left_to_the_host():
    renderer = OpenCLRenderer(fp64=False)
    assert not renderer.supports("add", np.dtype(np.float64))
    assert renderer.supports("add", np.dtype(np.float32))
    assert "cl_khr_fp64" not in renderer.prelude
