"""Which float non-float inputs become, as JAX 0.10 picks it: 64-bit integers go to
the default float, bools and narrower integers to float32, even with x64 on."""
import numpy as np
import pytest

import ember.numpy as enp

NARROW = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32"]
FUNCTIONS = {"mean": enp.mean, "var": enp.var, "sqrt": enp.sqrt, "sin": enp.sin,
             "true_divide": lambda x: enp.true_divide(x, x)}


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("dtype", NARROW + ["int64", "uint64", "float16", "float64"])
def test_float_result_dtype_under_x64(x64, name, dtype):
    out = FUNCTIONS[name](enp.ones(3, dtype))
    expected = dtype if dtype.startswith("float") else \
        "float64" if np.dtype(dtype).itemsize == 8 else "float32"
    assert out.dtype == np.dtype(expected)


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("dtype", NARROW + ["int64"])
def test_float_result_dtype_matches_jax(x64, name, dtype):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    with jax.enable_x64(True):
        theirs = {"mean": jnp.mean, "var": jnp.var, "sqrt": jnp.sqrt, "sin": jnp.sin,
                  "true_divide": lambda x: jnp.true_divide(x, x)}[name](jnp.ones(3, dtype))
        assert FUNCTIONS[name](enp.ones(3, dtype)).dtype == theirs.dtype
