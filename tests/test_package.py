"""The package's shape: the layering contracts of pyproject.toml hold, and the public
namespace imports whole."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_layering_contracts_hold():
    pytest.importorskip("importlinter", reason="pip install import-linter (the test extra)")
    # A fresh process, so the contracts see this checkout's ember whatever is imported here.
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_star_import_gives_every_public_name():
    import ember

    namespace: dict = {}
    exec("from ember import *", namespace)
    assert set(ember.__all__) <= set(namespace)
    assert namespace["jit"] is ember.jit and namespace["numpy"] is ember.numpy
