"""What a child Python process needs to import the same Ember as this one."""
from __future__ import annotations

import os
import sys

__all__ = ["python_path"]


def python_path() -> str:
    """This process's ``sys.path`` as a ``PYTHONPATH`` (its empty entry, the working
    directory, spelled out): a child started with it imports the same Ember, from a
    source tree too."""
    return os.pathsep.join(p or os.getcwd() for p in sys.path)
