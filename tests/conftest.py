"""Shared test fixtures: backends present, x64 mode, a private compile cache."""
from __future__ import annotations

import os

import hypothesis
import pytest

import ember
from ember.runtime.devices import available_backends

hypothesis.settings.register_profile(
    "ci", deadline=None, max_examples=40, derandomize=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow,
                           hypothesis.HealthCheck.data_too_large])
hypothesis.settings.register_profile("dev", deadline=None, max_examples=20)
hypothesis.settings.load_profile(os.environ.get("EMBER_HYPOTHESIS_PROFILE", "ci"))

BACKENDS = available_backends()
ember.config.update("verify", True)  # the IR verifier runs after every graph pass in tests


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Never touch the user's real compile cache from tests."""
    if not os.environ.get("EMBER_CACHE_DIR"):
        ember.config.update("cache_dir", str(tmp_path_factory.mktemp("ember-cache")))
        # (and the processes tests start share it, with the per-host libraries this
        # long-lived process builds: a short child leaves no build behind)
        os.environ["EMBER_CACHE_DIR"] = ember.config.cache_dir
    os.environ.setdefault("EMBER_BUILD_AT_EXIT", "0")
    yield


@pytest.fixture
def x64():
    """Run a test with 64-bit dtypes enabled (gradient checks use float64)."""
    with ember.config.override(enable_x64=True):
        yield


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Every backend present on this machine; tests compare each against 'reference'."""
    with ember.config.override(backend=request.param):
        yield request.param
