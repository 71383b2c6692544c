"""What ``ember launch`` runs in each process: the user's script as ``__main__``, with
its exit status recorded for the launcher."""
from __future__ import annotations

import runpy
import sys

from ember.distributed.exit_status import record_exit


def _status(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m ember.distributed.rank_main script.py [args...]")
    sys.argv = sys.argv[1:]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as stop:
        record_exit(_status(stop.code))
        raise
    except BaseException:
        record_exit(1)
        raise
    record_exit(0)


if __name__ == "__main__":
    main()
