"""Which loop of an elementwise kernel runs innermost: the store's contiguous axis,
unless the kernel computes an expensive function of an array it reads transposed;
then the axis its reads walk contiguously, so that the function runs in SIMD lanes.
And which innermost loops are marked for SIMD at all."""
from __future__ import annotations

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu.backend import cpu_policy
from ember.codegen import indexing as ix
from ember.codegen.c import CRenderer
from ember.codegen.kernel_ir import Let, Load, Loop, Store
from ember.compiler.steps import lower_schedule
from ember.passes.fusion import absorb_into_contractions, schedule_groups
from ember.passes.pipeline import run_pipeline

POLICY = cpu_policy(CRenderer(2))
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 48, 40)).astype(np.float32)
y = rng.standard_normal((4, 40, 48)).astype(np.float32)


def kernels_of(fun, *args):
    graph = absorb_into_contractions(run_pipeline(ember.jit(fun).lower(*args).graph, "cpu"),
                                     POLICY)
    return [step.kernel for step in lower_schedule(schedule_groups(graph, POLICY), threads=2)
            if step.kernel is not None]


def only_kernel(fun, *args):
    (kernel,) = kernels_of(fun, *args)
    return kernel


def innermost(kernel) -> Loop:
    loops = [stmt for stmt in kernel.walk() if isinstance(stmt, Loop)]
    return next(loop for loop in loops if not any(isinstance(s, Loop) for s in loop.body))


def steps(kernel, loop: Loop) -> tuple[list[int], list[int]]:
    """The strides of the loads and of the stores along ``loop``."""
    loads = [ix.coefficient(s.node.index, loop.sym) for s in kernel.walk()
             if isinstance(s, Let) and isinstance(s.node, Load)]
    stores = [ix.coefficient(s.index, loop.sym) for s in kernel.walk() if isinstance(s, Store)]
    return loads, stores


def check(fun, *args):
    reference = ember.jit(fun, backend="reference")(*args)
    np.testing.assert_allclose(np.asarray(ember.jit(fun)(*args)), np.asarray(reference),
                               rtol=2e-6, atol=1e-6)


def test_an_expensive_function_of_a_transposed_read_runs_along_the_read():
    fun = lambda x: jnp.tanh(jnp.swapaxes(x, 1, 2))
    kernel = only_kernel(fun, x)
    loop = innermost(kernel)
    assert steps(kernel, loop) == ([1], [48]) and loop.vector
    check(fun, x)


def test_a_cheap_transposed_copy_keeps_the_stores_order():
    fun = lambda x: jnp.swapaxes(x, 1, 2) * 2.0
    kernel = only_kernel(fun, x)
    assert steps(kernel, innermost(kernel)) == ([40], [1])
    check(fun, x)


def test_reads_in_both_orders_keep_the_stores_order():
    fun = lambda x, y: jnp.exp(jnp.swapaxes(x, 1, 2) + y)
    kernel = only_kernel(fun, x, y)
    loads, stores = steps(kernel, innermost(kernel))
    assert sorted(loads) == [1, 40] and stores == [1]
    check(fun, x, y)


def test_a_short_innermost_loop_is_left_to_the_c_compiler():
    """im2col's patch kernel walks the 3 taps of a row innermost: not marked for SIMD."""
    images = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    weights = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))
    (patches,) = [k for k in kernels_of(conv, images, weights) if "gather" in k.ops]
    loop = innermost(patches)
    assert loop.sym.extent == 3 and not loop.vector
    check(conv, images, weights)
