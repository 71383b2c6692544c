"""What the runtimes a generated library links read at load (toolchain._RUNTIME_SETTINGS):
set while the library loads, never left in the environment, and never over the user's."""
import ctypes

import pytest

from ember.backends.cpu import toolchain
from ember.config import config

# A library whose constructor records the environment as its dependencies see it at load.
SOURCE = """
#include <stdlib.h>
#include <string.h>
static char seen[64] = "unset";
__attribute__((constructor)) static void record(void) {
  const char *value = getenv("%s");
  if (value) { strncpy(seen, value, sizeof seen - 1); }
}
const char *seen_at_load(void) { return seen; }
"""


@pytest.fixture
def cache_dir(tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache")):
        yield tmp_path / "cache"


def seen_at_load(variable: str) -> str:
    if toolchain.find_toolchain() is None:
        pytest.skip("needs a C compiler")
    path = toolchain.compile_shared_library(SOURCE % variable, name="env_probe")
    function = toolchain.load_library(path).seen_at_load
    function.restype = ctypes.c_char_p
    return function().decode()


@pytest.mark.parametrize("variable, value", [
    (name, value) for name, value, _ in toolchain._RUNTIME_SETTINGS])
def test_setting_applies_while_loading_only(cache_dir, monkeypatch, variable, value):
    for name, _, deciders in toolchain._RUNTIME_SETTINGS:
        for unset in (name, *deciders):
            monkeypatch.delenv(unset, raising=False)
    assert seen_at_load(variable) == value
    assert all(name not in toolchain.os.environ for name, _, _ in toolchain._RUNTIME_SETTINGS)


def test_openmp_wait_left_to_the_user(cache_dir, monkeypatch):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    assert seen_at_load("GOMP_SPINCOUNT") == "unset"


def test_user_value_kept(cache_dir, monkeypatch):
    monkeypatch.setenv("GOMP_SPINCOUNT", "123")
    assert seen_at_load("GOMP_SPINCOUNT") == "123"
