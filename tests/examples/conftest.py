"""Load the scripts under examples/ as modules (they are not a package)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="session")
def load_example():
    """``load_example("digits_cnn")``: the module, imported once per session (examples
    register pytree classes, which may happen only once)."""

    def load(name: str) -> ModuleType:
        module_name = f"ember_examples.{name}"
        if module_name not in sys.modules:
            spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        return sys.modules[module_name]

    return load
