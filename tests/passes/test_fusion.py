"""Fusion decisions: how many kernels common programs take, what each computes, and why
each boundary exists. These run the pass pipeline, fusion and lowering (no C compiler)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax, nn
from ember.backends.cpu.backend import cpu_policy
from ember.compiler.steps import lower_schedule
from ember.codegen.c import CRenderer
from ember.passes.fusion import FusionPolicy, absorb_into_contractions, schedule_groups
from ember.passes.pipeline import run_pipeline
from ember.passes.schedule import Schedule
from ember.runtime.inspect import make_graph

x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
POLICY = cpu_policy(CRenderer(2))


def fuse(graph, policy: FusionPolicy) -> Schedule:
    """The pipeline's two fusion stages: contractions absorb, then the grouping."""
    return schedule_groups(absorb_into_contractions(graph, policy), policy)


def schedule_of(fun, *args, optimize: bool = True) -> Schedule:
    graph = ember.jit(fun).lower(*args).graph if optimize else make_graph(fun)(*args)
    if optimize:
        graph = run_pipeline(graph, "cpu")
    return fuse(graph, POLICY)


def kinds(schedule: Schedule) -> list[str]:
    return [group.kind for group in schedule.groups]


def kernel_ops(schedule: Schedule) -> list[list[str]]:
    return [step.kernel.ops for step in lower_schedule(schedule, threads=2) if step.kernel is not None]


def gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def layernorm(x, gamma, beta):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = jnp.mean(centered * centered, axis=-1, keepdims=True)
    return centered * lax.rsqrt(var + 1e-5) * gamma + beta


def test_tanh_gelu_is_one_kernel():
    assert kinds(schedule_of(gelu, x)) == ["loop"]
    assert kinds(schedule_of(nn.gelu, x)) == ["loop"]


def test_thirty_op_elementwise_chain_is_one_kernel():
    def chain(x, y):
        for i in range(10):
            x = jnp.sin(x) * y + float(i)
        return x

    schedule = schedule_of(chain, x, x, optimize=False)
    assert len(schedule.graph.eqns) >= 30
    assert kinds(schedule) == ["loop"]


@pytest.mark.parametrize("softmax", [nn.softmax, lambda v: jnp.exp(v) / jnp.sum(
    jnp.exp(v), axis=-1, keepdims=True)])
def test_softmax_over_rows_is_one_row_wise_kernel(softmax):
    schedule = schedule_of(softmax, x)
    assert kinds(schedule) == ["loop"]
    assert schedule.groups[0].outer_rank == 1


@pytest.mark.parametrize("shape", [(1, 4, 8, 16), (4, 1, 8, 16), (1, 1, 8, 16)])
def test_softmax_with_axes_of_size_one_is_still_one_row_wise_kernel(shape):
    # A reshape that adds the keepdims axis reads a size-1 batch axis as 0, not as its
    # loop variable: that loop runs once, so it still belongs to the rows.
    v = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for softmax in (nn.softmax, layernorm_of_rows):
        schedule = schedule_of(softmax, v)
        assert kinds(schedule) == ["loop"]
        assert schedule.groups[0].outer_rank == 3


def layernorm_of_rows(v):
    return layernorm(v, np.ones(v.shape[-1], np.float32), np.zeros(v.shape[-1], np.float32))


def test_softmax_keeps_its_exponentials_for_the_output_loop():
    (ops,) = kernel_ops(schedule_of(nn.softmax, x))
    assert ops.count("exp") == 1


def test_layernorm_over_rows_is_one_row_wise_kernel():
    gamma, beta = np.ones(128, np.float32), np.zeros(128, np.float32)
    schedule = schedule_of(layernorm, x, gamma, beta)
    assert kinds(schedule) == ["loop"]
    layer = nn.LayerNorm.init(128)
    assert kinds(schedule_of(lambda v: layer(v), x)) == ["loop"]


def test_dense_bias_relu_is_one_gemm_with_its_epilogue():
    w, b = np.ones((128, 256), np.float32), np.ones(256, np.float32)
    schedule = schedule_of(lambda x, w, b: jnp.maximum(x @ w + b, 0.0), x, w, b)
    assert kinds(schedule) == ["library"]
    (ops,) = kernel_ops(schedule)
    assert ops == ["add", "max"]


def _gelu_layer_loss(w, b, w2):
    return jnp.sum((nn.gelu(x @ w + b, approximate=True) @ w2) ** 2)


def test_a_gemm_epilogue_that_stores_tanh_also_computes_its_consumer():
    # The backward needs GELU's tanh, so the epilogue of x @ w stores it; the GELU itself
    # (the next product's operand) is computed in the same loop, not in a kernel of its
    # own that reads the product and the tanh back.
    w, b = np.full((128, 256), 0.01, np.float32), np.zeros(256, np.float32)
    w2 = np.full((256, 32), 0.01, np.float32)
    schedule = schedule_of(ember.grad(_gelu_layer_loss, argnums=(0, 1, 2)), w, b, w2)
    assert kinds(schedule) == ["library"] * 4 + ["loop", "library"]
    first = kernel_ops(schedule)[0]
    assert first.count("tanh") == 1 and first[-1] == "mul"  # tanh, then 0.5 x (1 + tanh)
    assert len(schedule.groups[0].roots) == 3  # the product, tanh, the GELU


def test_transpose_folds_into_the_kernel_that_reads_it():
    schedule = schedule_of(lambda x: x.T * 2 + 1, x)
    assert kinds(schedule) == ["loop"]
    (ops,) = kernel_ops(schedule)
    assert ops == ["mul", "add"]  # no copy: the transpose is an index


def test_a_value_needed_twice_at_one_position_is_computed_once():
    schedule = schedule_of(lambda x: jnp.sin(x) + jnp.sin(x), x, optimize=False)
    assert [e.prim.name for e in schedule.graph.eqns].count("sin") == 2  # no CSE ran
    (ops,) = kernel_ops(schedule)
    assert ops.count("sin") == 1


def test_dead_work_is_dropped():
    def fun(x):
        unused = jnp.exp(x) @ x.T
        return x * 2.0, unused.shape

    schedule = schedule_of(lambda x: fun(x)[0], x, optimize=False)
    assert kinds(schedule) == ["loop"]
    assert [g.name for g in schedule.groups] == ["fusion_0"]
    (ops,) = kernel_ops(schedule)
    assert ops == ["mul"]


def test_expensive_values_used_by_several_kernels_are_stored_once():
    def fun(x):
        e = jnp.exp(x)
        return jnp.sum(e, axis=0), e.T + 1.0

    schedule = schedule_of(fun, x)
    exp_count = sum(ops.count("exp") for ops in kernel_ops(schedule))
    assert exp_count == 1


def test_cheap_values_are_recomputed_rather_than_stored():
    def fun(x):
        y = x * 3.0 + 1.0
        return jnp.sum(y, axis=0), y.T

    schedule = schedule_of(fun, x)
    assert len(schedule.groups) == 2
    assert all(group.roots == group.roots[:1] for group in schedule.groups)


def test_constants_are_recomputed_by_every_kernel_that_needs_them():
    def fun(x):
        ones = jnp.ones_like(x)
        return tuple(jnp.sum(x * ones * i, axis=axis) for i in range(3) for axis in (0, 1))

    schedule = schedule_of(fun, x, optimize=False)
    assert all(group.reads() for group in schedule.groups)  # none just fills a buffer


def test_a_program_output_is_stored_by_the_kernel_that_consumes_it():
    schedule = schedule_of(lambda x: (jnp.tanh(x), jnp.tanh(x) * 2.0), x)
    assert kinds(schedule) == ["loop"]
    assert len(schedule.groups[0].roots) == 2


def test_siblings_reading_the_same_input_share_one_kernel():
    def fun(x):
        return jnp.sum(x * x, axis=1), jnp.max(x, axis=1)

    schedule = schedule_of(fun, x)
    assert kinds(schedule) == ["loop"]
    assert len(schedule.groups[0].roots) == 2


def test_column_reduction_used_by_rows_is_a_separate_kernel_and_says_why():
    schedule = schedule_of(lambda x: x - jnp.mean(x, axis=0), x)
    assert kinds(schedule) == ["loop", "loop"]
    assert "axes it iterates" in schedule.groups[0].why_boundary()


def test_host_calls_split_kernels_and_say_why():
    # cumlogsumexp has no native lowering on the CPU: it runs on the host
    schedule = schedule_of(lambda x: lax.cumlogsumexp(jnp.exp(x), axis=1) * 2.0, x)
    assert kinds(schedule) == ["loop", "host", "loop"]
    assert "host" in schedule.groups[1].why_boundary()


def test_native_calls_split_kernels_like_host_calls_and_say_what_they_are():
    schedule = schedule_of(lambda x: jnp.sort(jnp.exp(x), axis=1) * 2.0, x)
    assert kinds(schedule) == ["loop", "call", "loop"]
    assert "native call of its own" in schedule.groups[1].why_boundary()
    assert "call_1 [call]" in schedule.text()


def test_every_group_is_computed_after_the_buffers_it_reads():
    def fun(x, w):
        h = jnp.tanh(x @ w)
        return jnp.sort(h, axis=0) @ w.T, jnp.sum(h)

    w = np.ones((128, 128), np.float32)
    schedule = schedule_of(fun, x, w)
    written: set = set(schedule.graph.inputs)
    for group in schedule.groups:
        assert set(group.reads()) <= written
        written |= set(group.writes())


def test_schedule_text_names_the_groups():
    text = schedule_of(nn.softmax, x).text()
    assert "fusion_0 [loop]" in text and "row-wise" in text


def test_a_policy_without_native_ops_puts_everything_on_the_host():
    graph = make_graph(gelu)(x)
    schedule = fuse(graph, FusionPolicy(native=lambda eqn: False))
    assert set(kinds(schedule)) == {"host"}
