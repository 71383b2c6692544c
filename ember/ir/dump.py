"""``EMBER_DUMP=dir``: one folder per compiled program, one file per compiler stage.

    dir/<NNNN>-<program>.<backend>/<NNNN>-<stage>.<ext>

(``EMBER_DUMP=1`` dumps into ``./ember_dump`` and says so once.)

Programs are numbered in the order this process compiles them; a program's files in
the order its stages ran (graph passes first: ``0000-input.txt``, ``0001-after-<pass>``,
then the schedule, the kernel IR, the source and the build command).
"""
from __future__ import annotations

import functools
import itertools
import re
import sys
from pathlib import Path

from ember.config import DEFAULT_DUMP_DIR, config
from ember.ir.graph import Graph

_program_numbers = itertools.count(1)


class Dump:
    """The dump folder of one program; ``write`` adds the next stage's file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._files = itertools.count()

    @classmethod
    def open(cls, graph: Graph, backend_name: str, program_name: str | None = None) -> Dump | None:
        """A new folder for ``graph`` (named ``program_name``, else after the user function
        of its first located equation), or None when dumps are off."""
        if not config.dump_dir:
            return None
        name = program_name or _guess_name(graph)
        if config.dump_dir == DEFAULT_DUMP_DIR:  # (EMBER_DUMP=1: say where)
            _say_where(Path(DEFAULT_DUMP_DIR).resolve())
        folder = Path(config.dump_dir) / f"{next(_program_numbers):04d}-{name}.{backend_name}"
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder)

    def write(self, file: str, text: str) -> Path:
        """``text`` as the folder's next file, ``<NNNN>-<file>``."""
        path = self.folder / f"{next(self._files):04d}-{file}"
        path.write_text(text if text.endswith("\n") else text + "\n")
        return path


@functools.cache
def _say_where(folder: Path) -> None:
    """Once per folder, wherever the first program dumped into it came in the process."""
    print(f"ember: compiler dumps go to {folder}", file=sys.stderr)


def _guess_name(graph: Graph) -> str:
    for eqn in graph.eqns:
        if eqn.source is not None:
            return re.sub(r"[^A-Za-z0-9_]+", "_", eqn.source.function).strip("_") or "program"
    return "program"
