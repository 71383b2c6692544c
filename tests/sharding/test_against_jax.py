"""The same shard_map programs in JAX 0.10 (8 CPU devices, in a subprocess so that its
device count is set before it starts) and in Ember give the same values."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import P, lax

PROGRAMS = {
    "psum": ("lambda a: lax.psum(a, 'i')", "P('i')", "P('i')"),
    "ppermute": ("lambda a: lax.ppermute(a * a, 'i', [(j, (j + 3) % 8) for j in range(8)])",
                 "P('i')", "P('i')"),
    "all_gather": ("lambda a: lax.all_gather(a, 'i', axis=1, tiled=True)", "P('i')",
                   "P('i')"),
    "psum_scatter": ("lambda a: lax.psum_scatter(a, 'i', scatter_dimension=1, tiled=True)",
                     "P()", "P(None, 'i')"),
    "all_to_all": ("lambda a: lax.all_to_all(a, 'i', 1, 0, tiled=True)", "P('i')", "P('i')"),
    "all_to_all_untiled": ("lambda a: lax.all_to_all(a.reshape(1, 8, 2), 'i', 1, 2)",
                           "P('i')", "P('i')"),
    "grad_replicated": ("lambda a: jax.grad(lambda w: lax.pmean(jnp.sum(jnp.sin(w * a)), "
                        "'i'))(jnp.ones(16, jnp.float32))[None]", "P('i')", "P()"),
}
X = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 100

JAX_SCRIPT = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_num_cpu_devices", 8)
from jax import lax
from jax.sharding import PartitionSpec as P, AxisType
mesh = jax.make_mesh((8,), ("i",), axis_types=(AxisType.Auto,))
programs = json.loads(sys.argv[1])
x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 100
out = {}
for name, (body, i, o) in programs.items():
    f = jax.shard_map(eval(body), mesh=mesh, in_specs=eval(i), out_specs=eval(o))
    out[name] = np.asarray(f(x)).tolist()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def jax_results():
    pytest.importorskip("jax")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, "-c", JAX_SCRIPT, json.dumps(PROGRAMS)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_values_as_jax(jax_results, mesh8, name):
    body, in_spec, out_spec = PROGRAMS[name]
    scope = {"lax": lax, "jnp": jnp, "jax": ember, "P": P}
    f = ember.shard_map(eval(body, scope), mesh=mesh8, in_specs=eval(in_spec, scope),
                        out_specs=eval(out_spec, scope))
    np.testing.assert_allclose(np.asarray(f(X)), np.asarray(jax_results[name]),
                               rtol=1e-5, atol=1e-6)
