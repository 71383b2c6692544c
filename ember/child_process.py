"""What a child Python process needs to import the same Ember as this one."""
from __future__ import annotations

import os
import sys

__all__ = ["environment", "python_path", "throwaway_cache"]


def python_path() -> str:
    """This process's ``sys.path`` as a ``PYTHONPATH`` (its empty entry, the working
    directory, spelled out): a child started with it imports the same Ember, from a
    source tree too."""
    return os.pathsep.join(p or os.getcwd() for p in sys.path)


def environment(**variables: str) -> dict[str, str]:
    """This process's environment for a child that imports the same Ember, with
    ``variables`` set on top."""
    return dict(os.environ, PYTHONPATH=python_path(), **variables)


def throwaway_cache(directory: str | os.PathLike) -> dict[str, str]:
    """The variables that point a child's compile cache at ``directory``, a folder
    removed soon after: no unfinished library build is handed off at the child's exit
    (``config.build_at_exit``), as it would outlive the folder."""
    return {"EMBER_CACHE_DIR": str(directory), "EMBER_BUILD_AT_EXIT": "0"}
