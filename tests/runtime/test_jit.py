import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberTypeError, EmberValueError, TracerLeakError


def f(x, y):
    return enp.tanh(x * y + 1.0)


def test_jit_matches_eager():
    x = enp.asarray(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_allclose(np.asarray(ember.jit(f)(x, x)), np.asarray(f(x, x)), rtol=1e-6)


def test_cache_by_shape_and_dtype_and_retrace_on_new_shape():
    traces = []

    def g(x):
        traces.append(x.shape)
        return x * 2

    jg = ember.jit(g)
    jg(np.ones(3, np.float32))
    jg(np.ones(3, np.float32) + 1)
    assert traces == [(3,)]
    jg(np.ones(4, np.float32))
    assert traces == [(3,), (4,)]
    jg(np.ones(4, np.int32))
    assert len(traces) == 3


def test_static_argnums_and_argnames():
    def scale(x, n, *, mode):
        return x * n if mode == "mul" else x + n

    j = ember.jit(scale, static_argnums=1, static_argnames="mode")
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(j(x, 3, mode="mul")), x * 3)
    np.testing.assert_array_equal(np.asarray(j(x, 3, mode="add")), x + 3)


def test_unhashable_static_arg_is_clear():
    j = ember.jit(lambda x, shape: x, static_argnums=1)
    with pytest.raises(EmberValueError, match="not hashable"):
        j(np.ones(2), [1, 2])


def test_python_if_on_traced_value_explains_fix():
    def branchy(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(ConcretizationError, match="lax.cond") as info:
        ember.jit(branchy)(np.float32(1))
    assert isinstance(info.value, TypeError)


def test_leaked_tracer_names_where():
    leaked = []

    def leak(x):
        y = x * 2
        leaked.append(y)
        return y

    ember.jit(leak)(np.ones(2, np.float32))
    with pytest.raises(TracerLeakError, match="leaked") as info:
        leaked[0] + 1
    assert "test_jit.py" in str(info.value)


def test_non_array_return_names_type():
    with pytest.raises(EmberTypeError, match="returned a value of type str"):
        ember.jit(lambda x: "hello")(np.ones(2))


def test_non_array_argument_names_type():
    with pytest.raises(EmberTypeError, match="argument of type object"):
        ember.jit(lambda x: x)(object())


def test_shape_mismatch_names_shapes_and_line():
    def bad(x, y):
        return ember.lax.add(x, y)

    with pytest.raises(EmberValueError, match=r"\(3,\) and \(4,\)") as info:
        ember.jit(bad)(np.ones(3, np.float32), np.ones(4, np.float32))
    assert "test_jit.py" in str(info.value)


def test_lower_compile_and_inspect():
    x = np.ones((2, 3), np.float32)
    lowered = ember.jit(f).lower(x, x)
    text = lowered.as_text()
    assert "tanh" in text and "test_jit.py" in text
    compiled = lowered.compile()
    assert compiled.cost_analysis()["flops"] > 0
    assert compiled.cost_analysis()["bytes accessed"] > 0
    np.testing.assert_allclose(np.asarray(compiled(x, x)), np.tanh(x * x + 1), rtol=1e-6)
    with pytest.raises(EmberTypeError, match="compiled for f32"):
        compiled(np.ones((2, 3), np.int32), x)


def test_pytree_arguments_and_outputs():
    def g(params, x):
        return {"out": params["w"] * x + params["b"], "aux": (x,)}

    params = {"w": np.float32(2), "b": np.float32(1)}
    out = ember.jit(g)(params, np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(out["out"]), [1, 3, 5])
    assert isinstance(out["aux"], tuple)


def test_make_graph_shows_source_lines():
    graph = ember.make_graph(f)(np.ones(2, np.float32), np.ones(2, np.float32))
    text = str(graph)
    assert "mul" in text and "tanh" in text and "test_jit.py" in text


def test_constants_captured_from_closure():
    w = enp.asarray(np.arange(4, dtype=np.float32))
    g = ember.jit(lambda x: x * w)
    np.testing.assert_array_equal(np.asarray(g(np.ones(4, np.float32))), np.arange(4))


def test_nested_jit_inlines():
    inner = ember.jit(lambda x: x * 3)
    outer = ember.jit(lambda x: inner(x) + 1)
    np.testing.assert_array_equal(np.asarray(outer(np.ones(2, np.float32))), [4, 4])


def test_weak_python_scalars_keep_array_dtype():
    x = enp.asarray(np.ones(2, np.float16))
    assert (x + 1.0).dtype == np.float16
    assert (x * 2).dtype == np.float16


def test_x64_off_canonicalizes_float64():
    x = enp.asarray(np.ones(2, np.float64))
    assert x.dtype == np.float32


def test_x64_on_keeps_float64(x64):
    x = enp.asarray(np.ones(2, np.float64))
    assert x.dtype == np.float64


def test_debug_nans_names_op_and_line():
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match="'mul'|'log'|'sub'"):
            ember.jit(lambda x: ember.lax.log(x) * 1.0)(np.float32(-1.0))


def test_donated_arrays_cannot_be_used_again():
    step = ember.jit(lambda w, g: w - 0.1 * g, donate_argnums=0)
    w = enp.asarray(np.ones(4, np.float32))
    g = enp.asarray(np.ones(4, np.float32))
    w2 = step(w, g)
    np.testing.assert_allclose(np.asarray(w2), 0.9)
    assert w.is_deleted() and not g.is_deleted()
    with pytest.raises(EmberValueError, match="donated"):
        np.asarray(w)
    with pytest.raises(EmberValueError, match="donated"):
        step(w, g)
    w3 = step(w2, g)  # the outputs carry on
    np.testing.assert_allclose(np.asarray(w3), 0.8, rtol=1e-6)


# NumPy arguments are read in place on host-memory backends (no copy per call); what
# the caller does to them afterwards must never show in a result.
@pytest.mark.parametrize("fun", [lambda x: x, lambda x: x.reshape(-1), lambda x: (x, x * 2)],
                         ids=["identity", "reshape", "pair"])
def test_numpy_arguments_are_never_aliased_by_results(backend, fun):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = ember.jit(fun)(x)
    first = np.asarray(result[0] if isinstance(result, tuple) else result).copy()
    x[...] = -1
    again = np.asarray(result[0] if isinstance(result, tuple) else result)
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(first.reshape(-1), np.arange(6, dtype=np.float32))


def test_numpy_arguments_are_not_written(backend):
    x = np.arange(8, dtype=np.float32)
    expected = x.copy()
    out = ember.jit(lambda x: ember.lax.fori_loop(0, 5, lambda i, c: c * 2 + 1, x),
                    donate_argnums=0)(x)
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(np.asarray(out), _five_steps(expected))


def _five_steps(x):
    for _ in range(5):
        x = x * 2 + 1
    return x


@pytest.mark.parametrize("make", [lambda a: a[:, ::2], lambda a: a.astype(np.float64),
                                  lambda a: np.asfortranarray(a)],
                         ids=["strided", "float64", "fortran"])
def test_numpy_arguments_of_any_layout(backend, make):
    x = make(np.arange(24, dtype=np.float32).reshape(4, 6))
    np.testing.assert_allclose(np.asarray(ember.jit(lambda x: x * 2 + 1)(x)), x * 2 + 1)


def test_repeated_calls_with_numpy_arguments_take_the_cached_program(backend):
    calls = []

    def f(x, y):
        calls.append(1)  # counts traces
        return x * 2 + y

    jitted = ember.jit(f)
    x32 = np.arange(4, dtype=np.float32)
    x64 = np.arange(4, dtype=np.float64) + 0.5
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(jitted(x32, x32)), x32 * 3)
    assert len(calls) == 1
    # float64 becomes float32 (x64 off): the same program, fed a converted copy
    out = jitted(x64, enp.asarray(x32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), (x64 * 2 + x32).astype(np.float32))
    np.testing.assert_allclose(np.asarray(jitted(x64, x32)), (x64 * 2 + x32).astype(np.float32))
    np.testing.assert_allclose(np.asarray(jitted(x32[::-1], x32)), x32[::-1] * 2 + x32)
    assert len(calls) == 1
    jitted(np.zeros((2, 4), np.float32), x32)  # a new shape: traced again
    assert len(calls) == 2


def test_pytree_arguments_take_the_cached_program_too(backend):
    traces = []

    def step(params, batch, extra):
        traces.append(1)
        scale = 1.0 if extra is None else extra[0]
        return {k: v - 0.5 * batch * scale for k, v in params.items()}

    jitted = ember.jit(step)
    params = {"b": enp.asarray(np.ones(3, np.float32)), "a": np.full(3, 2.0, np.float32)}
    batch = np.arange(3, dtype=np.float32)
    for _ in range(3):
        params = jitted(params, batch, None)
    assert len(traces) == 1  # the second and third calls found the first call's program
    np.testing.assert_allclose(np.asarray(params["a"]), 2.0 - 1.5 * batch)
    np.testing.assert_allclose(np.asarray(params["b"]), 1.0 - 1.5 * batch)
    out = jitted(params, batch, [enp.asarray(np.float32(2.0))])  # a new structure: traced
    assert len(traces) == 2
    np.testing.assert_allclose(np.asarray(out["a"]), 2.0 - 2.5 * batch)
    renamed = jitted({"a": params["a"], "c": params["b"]}, batch, None)  # other keys
    assert len(traces) == 3 and sorted(renamed) == ["a", "c"]
    jitted({1: params["a"], "x": params["b"]}, batch, None)  # keys that do not sort
    jitted({1: params["a"], "x": params["b"]}, batch, None)
    assert len(traces) == 4


def test_donated_pytree_leaves_are_consumed_on_the_cached_path():
    step = ember.jit(lambda p, g: {k: v - g for k, v in p.items()}, donate_argnums=0)
    g = enp.asarray(np.ones(4, np.float32))
    params = {"w": enp.asarray(np.zeros(4, np.float32))}
    for expected in (-1.0, -2.0, -3.0):
        old = params
        params = step(params, g)
        assert old["w"].is_deleted() and not g.is_deleted()
        np.testing.assert_allclose(np.asarray(params["w"]), expected)


def test_call_host_matches_the_ordinary_call():
    compiled = ember.jit(lambda a, b: (a @ b, a.T)).lower(
        np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)).compile()
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((3, 2), np.float32)
    product, transposed = compiled.call_host([a, b])
    expected = compiled(a, b)
    np.testing.assert_array_equal(product, np.asarray(expected[0]))
    np.testing.assert_array_equal(transposed, a.T)
    assert not transposed.flags.writeable or not np.shares_memory(transposed, a)


def test_the_cached_call_follows_a_config_change_and_its_undoing():
    double = ember.jit(lambda v: v * 2)
    x = np.ones(3, np.float64)
    assert double(x).dtype == np.float32 and double(x).dtype == np.float32
    with ember.enable_x64():
        assert double(x).dtype == np.float64 and double(x).dtype == np.float64
    assert double(x).dtype == np.float32  # (an equal snapshot: the first program again)
    assert double._cache_size() == 2


def test_a_cached_call_with_an_array_of_another_device_moves_it():
    double = ember.jit(lambda v: v * 2, backend="cpu")
    on_reference = ember.device_put(np.arange(3, dtype=np.float32), "reference")
    for _ in range(2):  # (the second call takes the cached path)
        np.testing.assert_array_equal(np.asarray(double(on_reference)), [0, 2, 4])
