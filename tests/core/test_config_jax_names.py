"""JAX's option names and absl helpers on ``ember.config``."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def test_enable_x64_by_jax_name_changes_dtypes():
    assert ember.config.jax_enable_x64 is False
    assert jnp.asarray(np.ones(2)).dtype == np.float32
    with ember.config.override(jax_enable_x64=True):
        assert ember.config.jax_enable_x64 is True and ember.config.enable_x64 is True
        assert jnp.asarray(np.ones(2)).dtype == np.float64
    assert ember.config.enable_x64 is False


def test_update_by_jax_name_then_back():
    ember.config.update("jax_debug_nans", True)
    try:
        assert ember.config.debug_nans is True
        with pytest.raises(FloatingPointError):
            ember.jit(lambda x: jnp.log(x))(np.array([-1.0], np.float32))
    finally:
        ember.config.update("jax_debug_nans", False)
    assert ember.config.jax_debug_nans is False


def test_platforms_picks_the_first_present():
    saved = ember.config.backend
    try:
        ember.config.update("jax_platforms", "reference,cpu")
        assert ember.config.backend == "reference"
        assert ember.default_backend() == "reference"
        ember.config.update("jax_platforms", "")
        assert ember.config.backend is None
        with pytest.raises(ValueError, match="unknown platform 'tpu'"):
            ember.config.update("jax_platforms", "tpu")
    finally:
        ember.config.update("backend", saved)


def test_unknown_option_is_attribute_error_as_jax():
    with pytest.raises(AttributeError, match="jax_no_such_option"):
        ember.config.update("jax_no_such_option", 1)
    with pytest.raises(AttributeError):
        ember.config.jax_no_such_option  # noqa: B018


def _run(code: str, *argv: str) -> str:
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                            text=True, check=True)
    return result.stdout.strip()


def test_parse_flags_reads_jax_arguments():
    code = ("import ember; ember.config.parse_flags_with_absl(); "
            "print(ember.config.enable_x64, ember.config.debug_nans, ember.config.backend)")
    assert _run(code, "--jax_enable_x64", "--jax_platforms=reference", "--other") == \
        "True False reference"
    assert _run(code, "--jax_debug_nans=true", "--", "--jax_enable_x64") == "False True None"


def test_config_with_absl_without_absl_reads_argv():
    try:
        import absl  # noqa: F401
        pytest.skip("absl is installed: config_with_absl defers to absl.app.run")
    except ImportError:
        pass
    code = "import ember; ember.config.config_with_absl(); print(ember.config.enable_x64)"
    assert _run(code, "--jax_enable_x64=1") == "True"


def test_jax_accepts_the_same_calls():
    jax = pytest.importorskip("jax")
    assert jax.config.jax_enable_x64 == ember.config.jax_enable_x64
    with pytest.raises(AttributeError):
        jax.config.update("jax_no_such_option", 1)
