import os
import subprocess
import sys

import pytest

import ember


def test_update_and_override_restore():
    assert ember.config.debug_nans is False
    with ember.config.override(debug_nans=True):
        assert ember.config.debug_nans is True
    assert ember.config.debug_nans is False


def test_unknown_flag_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown Ember flag 'no_such_flag'"):
        ember.config.update("no_such_flag", 1)


def test_environment_variable_sets_flag():
    env = dict(os.environ, EMBER_DEBUG_NANS="1", EMBER_BACKEND="reference")
    out = subprocess.run([sys.executable, "-c", "import ember; print(ember.config.debug_nans, "
                          "ember.config.backend)"], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["True", "reference"]


def test_bad_boolean_in_environment():
    env = dict(os.environ, EMBER_DEBUG_NANS="maybe")
    out = subprocess.run([sys.executable, "-c", "import ember"], env=env, capture_output=True,
                         text=True)
    assert out.returncode != 0 and "expected a boolean" in out.stderr
