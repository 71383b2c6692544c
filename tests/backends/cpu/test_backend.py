"""The CPU backend as users meet it: outputs of every kind, donation, in-place updates,
what compiled objects show (kernels, source lines, schedule, costs, memory), dumps."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_testing import assert_matches_reference, compiled, requires_cpu

import ember
import ember.numpy as jnp
from ember import lax
from ember.runtime.devices import get_backend

pytestmark = requires_cpu

x = np.random.default_rng(0).standard_normal((32, 48)).astype(np.float32)


def test_the_cpu_backend_is_present_and_names_its_device():
    backend = get_backend("cpu")
    assert backend.name == "cpu" and backend.devices()[0].platform == "cpu"


def test_outputs_of_every_kind():
    const = np.arange(48, dtype=np.float32)

    def fun(a, b):
        y = jnp.exp(a)
        return a, y, y, 3.0, const, b * const, jnp.sum(y)

    assert_matches_reference(fun, x, x)


def test_program_without_equations():
    assert_matches_reference(lambda a, b: (b, a), x, 2.0)


def test_results_are_fresh_arrays_and_repeated_calls_agree():
    f = ember.jit(lambda a: jnp.tanh(a) * 2.0, backend="cpu")
    first, second = np.asarray(f(x)), np.asarray(f(x))
    np.testing.assert_array_equal(first, second)
    assert not np.shares_memory(first, second)


def test_non_contiguous_arguments():
    view = np.asarray(x)[:, ::2]
    assert not view.flags.c_contiguous
    assert_matches_reference(lambda a: a * 2.0 + 1.0, view)


def test_donated_argument_becomes_the_output_buffer():
    fun = lambda a, b: jnp.tanh(a) + b
    donated = compiled(fun, x, x, donate_argnums=0)
    kept = compiled(fun, x, x)
    assert donated.memory_analysis()["alias_bytes"] == x.nbytes
    assert kept.memory_analysis()["alias_bytes"] == 0
    argument = x.copy()
    out = ember.jit(fun, backend="cpu", donate_argnums=0)(argument, x)
    np.testing.assert_allclose(np.asarray(out), np.tanh(x) + x, rtol=1e-6)


def test_an_output_never_takes_the_buffer_of_an_input_read_after_it_is_stored():
    """Sibling kernels merged into one store the first output before the second kernel
    loads its operands: the donated ``a`` must not be overwritten by ``b * 2`` first
    (the jitted gradient of cummax was wrong this way)."""
    y = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)

    def fun(a, b):
        return b * 2.0, a + b

    doubled, total = ember.jit(fun, backend="cpu", donate_argnums=0)(x.copy(), y)
    np.testing.assert_allclose(np.asarray(doubled), y * 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(total), x + y, rtol=1e-6)


def test_an_output_read_through_a_slice_is_stored_whole():
    """A program output only sliced by its consumer is not stored by that consumer's
    smaller loop (which would leave the rest of the output unwritten)."""
    def fun(a):
        y = a * 2.0
        return y, lax.slice(y, (0, 0), (3, 5)) + 1.0

    assert_matches_reference(fun, x)


def test_dead_temporaries_are_reused_and_updated_in_place():
    def chain(a):
        for _ in range(6):
            a = jnp.sort(jnp.tanh(a) * 1.5, axis=1)  # host calls force a buffer each time
        return a

    memory = compiled(chain, x).memory_analysis()
    assert memory["temp_bytes"] <= 8 * x.nbytes
    assert_matches_reference(chain, x)


def test_kernels_show_source_lines_and_generated_c():
    def fun(a):
        return jnp.tanh(a) * 2.0  # the line the kernel must name

    (kernel,) = compiled(fun, x).kernels
    assert kernel.kind == "kernel"
    assert kernel.ops == ["tanh", "mul"]
    assert any("test_backend.py" in line for line in kernel.source_lines)
    assert "test_backend.py" in kernel.source and "for (" in kernel.source


def test_library_calls_and_host_calls_are_listed():
    w = np.ones((48, 64), np.float32)
    # (cumlogsumexp still runs on the host)
    kernels = compiled(lambda a, w: lax.cumlogsumexp(a @ w, axis=0), x, w).kernels
    assert [k.kind for k in kernels] == ["library", "host"]
    assert kernels[0].source.startswith("ember_gemm_f32(")  # BLAS through include/ember_gemm.h
    assert kernels[1].why_boundary


def test_a_host_call_reads_a_reshape_of_a_stored_value_as_a_view():
    rng = np.random.default_rng(1)
    v = rng.standard_normal(64).astype(np.float32)
    kept = v.copy()
    expected = np.linalg.det(v.astype(np.float64).reshape(8, 8))
    # an input (a slot of the pointer array) and a kernel's result (the arena), read by
    # the host call (lu) in the reshape's place: no kernel copies them into its operand
    for fun, kinds in [(lambda a: jnp.linalg.det(a.reshape(8, 8)), ["host", "kernel"]),
                       (lambda a: jnp.linalg.det((a * 2.0).reshape(8, 8)) / 256.0,
                        ["kernel", "host", "kernel"])]:
        program = compiled(fun, v)
        assert [k.kind for k in program.kernels] == kinds
        np.testing.assert_allclose(np.asarray(program(v)), expected, rtol=1e-4)
    np.testing.assert_array_equal(v, kept)  # (the call read the argument in place)


def test_a_reshape_read_by_other_steps_is_still_stored():
    v = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    program = compiled(lambda a: (jnp.linalg.det(a.reshape(8, 8)), a.reshape(8, 8)), v)
    assert [k.kind for k in program.kernels][0] == "kernel"  # (the reshape, an output)
    det, matrix = program(v)
    np.testing.assert_array_equal(np.asarray(matrix), v.reshape(8, 8))
    np.testing.assert_allclose(np.asarray(det), np.linalg.det(v.astype(np.float64)
                                                              .reshape(8, 8)), rtol=1e-4)


def test_as_text_shows_the_graph_and_the_fused_groups():
    text = compiled(lambda a: jnp.exp(a).T * 2.0, x).as_text()
    assert "graph(" in text and "schedule: 1 steps" in text and "fusion_0 [loop]" in text


def test_cost_analysis_counts_fused_traffic():
    cost = compiled(lambda a: jnp.exp(a) * 2.0 + 1.0, x).cost_analysis()
    assert cost["bytes accessed"] == 2 * x.nbytes  # read once, written once
    assert cost["flops"] >= 3 * x.size


def test_thread_count_follows_the_config():
    big = np.ones((256, 1024), np.float32)
    with ember.config.override(num_threads=3):
        source = compiled(lambda a: jnp.exp(a), big).kernels[0].source
    assert "num_threads(3)" in source
    with ember.config.override(num_threads=1):
        source = compiled(lambda a: jnp.exp(a), big).kernels[0].source
    assert "omp parallel" not in source


def test_expensive_elements_go_parallel_sooner():
    """65536 elements: too few to wake a second thread for a multiply, enough for an erf
    (GELU's exact form: about 1 ns per element)."""
    mid = np.ones((256, 256), np.float32)
    with ember.config.override(num_threads=2):
        cheap = compiled(lambda a: a * 3.0 + 1.0, mid).kernels[0].source
        gelu = compiled(lambda a: a * 0.5 * (1.0 + lax.erf(a * 0.7071)), mid).kernels[0].source
    assert "omp parallel" not in cheap
    assert "#pragma omp parallel for" in gelu


def test_a_parallel_reduction_combines_the_threads_in_a_fixed_order():
    """Bitwise reproducible: thread t sums the t-th block, the parts are added in thread
    order (no OpenMP reduction clause across threads, no guided schedule)."""
    big = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    with ember.config.override(num_threads=3):
        program = compiled(lambda a: (jnp.sum(a * 1.5), jnp.max(a)), big)
        source = program.kernels[0].source
        sums = {float(np.asarray(ember.jit(lambda a: jnp.sum(a * 1.5))(big)))
                for _ in range(5)}
    assert "omp_get_thread_num()" in source and "acc0_part[3]" in source
    assert "parallel for" not in source and "guided" not in source
    assert len(sums) == 1
    scale = np.abs(big.astype(np.float64) * 1.5).sum()  # (the terms cancel: bound by it)
    np.testing.assert_allclose(sums.pop(), np.sum(big.astype(np.float64) * 1.5),
                               atol=1e-6 * scale)
    assert_matches_reference(lambda a: (jnp.sum(a * 1.5), jnp.max(a), jnp.min(a)), big)


def test_half_precision_is_stored_as_16_bits():
    half = x.astype(np.float16)
    source = compiled(lambda a: jnp.exp(a) * a, half).kernels[0].source
    assert "uint16_t" in source and "ember_f32_to_f16" in source
    assert_matches_reference(lambda a: jnp.exp(a) * a, half)


@pytest.mark.parametrize("optimize", [True, False])
def test_results_do_not_depend_on_the_pass_pipeline(optimize):
    with ember.config.override(optimize=optimize):
        assert_matches_reference(lambda a: ember.nn.softmax(a * 2.0) + lax.stop_gradient(a)
                                 if hasattr(lax, "stop_gradient") else ember.nn.softmax(a), x)


@pytest.mark.parametrize("features, width", [
    ({"avx2", "avx512f"}, "512"), ({"avx2"}, "256"), ({"sse4_2"}, None)])
def test_programs_ask_for_the_widest_vectors_the_cpu_has(monkeypatch, features, width):
    """GCC's own preference is narrower on AVX-512 CPUs and on AMD's first Zen."""
    from ember.backends.cpu import backend, toolchain

    found = toolchain.find_toolchain()
    if found is None or not found.target_isa.startswith("x86_64"):
        pytest.skip("x86-64 vector widths")
    monkeypatch.setattr(toolchain, "cpu_flags", lambda: frozenset(features))
    asked = [f for f in backend.extra_flags() if f.startswith("-mprefer-vector-width=")]
    assert asked == ([f"-mprefer-vector-width={width}"] if width else [])
