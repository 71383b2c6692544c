"""Run a program written for JAX, whose imports say Ember, on JAX itself: the same
source with only its import lines changed back."""
from __future__ import annotations

import inspect
import re
import types
from typing import Any

import pytest

# Ember import line -> the JAX one it stands for (at the start of a line).
IMPORTS = {
    "import ember as jax": "import jax",
    "import ember.numpy as jnp": "import jax.numpy as jnp",
    "from ember.scipy": "from jax.scipy",
    "from ember import": "from jax import",
}


def jax_source(module: types.ModuleType) -> str:
    source = inspect.getsource(module)
    for ours, theirs in IMPORTS.items():
        source = re.sub(rf"^{re.escape(ours)}\b", theirs, source, flags=re.MULTILINE)
    return source


def run_on_jax(module: types.ModuleType, entry: str = "main", *args: Any) -> Any:
    """``module.<entry>(*args)`` with the module's code running on JAX (float64, as the
    tests run Ember); skipped where JAX is not installed."""
    jax = pytest.importorskip("jax")
    namespace: dict[str, Any] = {"__name__": f"{module.__name__}_on_jax"}
    with jax.enable_x64(True):
        # Running the program's own source, rewritten, is the point here.
        code = compile(jax_source(module), f"{module.__file__} (on JAX)", "exec")
        exec(code, namespace)  # noqa: S102
        return namespace[entry](*args)
