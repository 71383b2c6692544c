"""The ranks of a job on one host share their compiled programs through the compile
cache: each library is built by one process while the others wait for it (logged under
EMBER_LOG=compile); damaged or missing entries are built again, once; a process that
waits longer than ``cache_wait_timeout`` builds a private copy instead."""
from __future__ import annotations

import collections
import fcntl
import os
import re

from ember.config import config
from ember.runtime.compile_cache import CompileCache, key_of
from tests.distributed.conftest import launch, needs_mpi

_BUILT = re.compile(r"ember: cc (\S+) [0-9.]+ s")
_RESULTS = re.compile(r"results ([0-9a-f]+) ([0-9a-f]+)")


def _run(processes: int, cache) -> tuple[collections.Counter, set[str]]:
    done = launch(processes, "compile_share.py", extra_env={
        "EMBER_CACHE_DIR": str(cache), "EMBER_LOG": "compile"})
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    text = done.stdout + done.stderr
    # (not the CPU launcher's library: it is built in the background, and a process
    # that ends first may leave it to another)
    builds = collections.Counter(n for n in _BUILT.findall(text) if n != "ember_launcher")
    results = _RESULTS.findall(text)
    assert len(results) == processes, text
    return builds, set(results)


def test_ranks_build_each_library_once_and_rebuild_damaged_entries(tmp_path):
    needs_mpi()
    cache = tmp_path / "cache"
    builds, results = _run(2, cache)
    assert builds and set(builds.values()) == {1}, builds  # one build each, not two
    assert len(results) == 1  # every rank computed the same
    libraries = list(cache.glob("*/*.so"))
    assert len(libraries) >= len(builds)
    for library in libraries:  # damaged: no longer matches its recorded hash
        library.write_bytes(b"not a library")
    for entry in cache.glob("*/*.json"):  # the program descriptions: lost
        entry.with_suffix(".sha256").unlink()
    rebuilt, again = _run(2, cache)
    assert set(rebuilt) == set(builds) and set(rebuilt.values()) == {1}, rebuilt
    assert again == results


def test_a_build_held_too_long_elsewhere_is_built_privately(tmp_path, capsys):
    cache = CompileCache(tmp_path / "cache")
    parts = ["some program"]
    key = key_of(parts, ".so")
    folder = cache.directory / key[:2]
    folder.mkdir()
    holder = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process is building this entry
    try:
        with config.override(cache_wait_timeout=0.2, log="compile"):
            path = cache.get_or_build(parts, ".so", lambda p: p.write_bytes(b"built here"))
    finally:
        os.close(holder)
    assert path.read_bytes() == b"built here"
    assert cache.directory not in path.parents
    assert cache.find(key, ".so") == path  # this process keeps using its copy
    assert CompileCache(cache.directory).find(key, ".so") is None  # the shared entry:
    # the other builder's to write
    assert "building a private copy" in capsys.readouterr().err
