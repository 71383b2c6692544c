"""The persistent compile cache: levels, atomic writes under a lock, damaged entries,
concurrent builders, and refusal of directories other users could write to."""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import stat
import time
import warnings
from pathlib import Path

import pytest

from ember.config import config
from ember.runtime import compile_cache
from ember.runtime.compile_cache import CompileCache, default_cache, hash_key

KEY = ["source text", "-O3", b"\x00binary part"]
CONTENT = b"artifact bytes " * 1000


def write_content(path: Path) -> None:
    path.write_bytes(CONTENT)


def failing_build(path: Path) -> None:
    raise AssertionError("the cache must not rebuild here")


@pytest.fixture
def cache_dir(tmp_path):
    directory = tmp_path / "cache"
    saved = config.cache_dir
    config.update("cache_dir", str(directory))
    yield directory
    config.update("cache_dir", saved)


@pytest.fixture
def fallback_cleanup():
    """Remove the private temp directories that fallback caches create."""
    caches: list[CompileCache] = []
    yield caches
    for cache in caches:
        if cache.directory != cache.requested_directory:
            shutil.rmtree(cache.directory, ignore_errors=True)


def test_key_parts_are_length_prefixed_and_typed():
    assert hash_key(["ab", "c"]) != hash_key(["a", "bc"])
    assert hash_key(["a"]) != hash_key([b"a"])
    assert hash_key(["a", ""]) != hash_key(["a"])
    assert hash_key(KEY) == hash_key(list(KEY))
    with pytest.raises(TypeError):
        hash_key([1])


def test_miss_then_memory_hit_then_disk_hit(cache_dir):
    cache = CompileCache(cache_dir)
    path = cache.get_or_build(KEY, ".bin", write_content)
    assert path.read_bytes() == CONTENT
    assert path == cache.artifact_path(KEY, ".bin")
    assert (cache.stats.disk_misses, cache.stats.memory_hits) == (1, 0)

    assert cache.get_or_build(KEY, ".bin", failing_build) == path
    assert cache.stats.memory_hits == 1

    fresh = CompileCache(cache_dir)  # a new process would look like this
    assert fresh.get_or_build(KEY, ".bin", failing_build) == path
    assert (fresh.stats.disk_hits, fresh.stats.disk_misses) == (1, 0)


def test_layout_sidecar_and_permissions(cache_dir):
    cache = CompileCache(cache_dir)
    path = cache.get_or_build(KEY, ".so", write_content)
    key = hash_key([*KEY, ".so"])
    assert path == cache_dir / key[:2] / f"{key}.so"
    sidecar = path.with_name(f"{key}.sha256")
    assert sidecar.read_text().strip() == hashlib.sha256(CONTENT).hexdigest()
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700
    leftovers = [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_suffix_is_part_of_the_key(cache_dir):
    cache = CompileCache(cache_dir)
    a = cache.get_or_build(KEY, ".so", write_content)
    b = cache.get_or_build(KEY, ".o", lambda p: p.write_bytes(b"other"))
    assert a != b and a.read_bytes() == CONTENT and b.read_bytes() == b"other"


def test_failed_build_leaves_no_entry(cache_dir):
    cache = CompileCache(cache_dir)

    def broken(path: Path) -> None:
        path.write_bytes(b"half")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        cache.get_or_build(KEY, ".bin", broken)
    artifact = cache.artifact_path(KEY, ".bin")
    assert not artifact.exists()
    assert [p for p in artifact.parent.iterdir() if p.suffix == ".tmp"] == []
    assert cache.get_or_build(KEY, ".bin", write_content).read_bytes() == CONTENT


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "empty"])
def test_damaged_artifact_is_rebuilt(cache_dir, damage):
    path = CompileCache(cache_dir).get_or_build(KEY, ".bin", write_content)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip_byte":
        data[len(data) // 2] ^= 0xFF
    else:
        data = bytearray()
    path.write_bytes(bytes(data))

    cache = CompileCache(cache_dir)
    rebuilt = cache.get_or_build(KEY, ".bin", write_content)
    assert rebuilt.read_bytes() == CONTENT
    assert (cache.stats.disk_hits, cache.stats.disk_misses) == (0, 1)


@pytest.mark.parametrize("sidecar", [None, "0" * 64, "not a hash", b"\xff\xfe"])
def test_planted_artifact_without_matching_sidecar_is_not_loaded(cache_dir, sidecar):
    cache = CompileCache(cache_dir)
    planted = cache.artifact_path(KEY, ".bin")
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"planted code")
    sidecar_path = planted.with_name(planted.name.removesuffix(".bin") + ".sha256")
    if isinstance(sidecar, str):
        sidecar_path.write_text(sidecar)
    elif isinstance(sidecar, bytes):
        sidecar_path.write_bytes(sidecar)

    path = cache.get_or_build(KEY, ".bin", write_content)
    assert path.read_bytes() == CONTENT
    assert cache.stats.disk_misses == 1


def test_missing_file_behind_memory_entry_is_rebuilt(cache_dir):
    cache = CompileCache(cache_dir)
    path = cache.get_or_build(KEY, ".bin", write_content)
    path.unlink()
    assert cache.get_or_build(KEY, ".bin", write_content).read_bytes() == CONTENT
    assert cache.stats.disk_misses == 2


def test_clear_empties_both_levels(cache_dir):
    cache = CompileCache(cache_dir)
    cache.get_or_build(KEY, ".bin", write_content)
    cache.clear()
    assert list(cache_dir.iterdir()) == []
    assert cache.stats == compile_cache.CacheStats()
    cache.get_or_build(KEY, ".bin", write_content)
    assert cache.stats.disk_misses == 1


def test_find_looks_up_by_key_without_building(cache_dir):
    cache = CompileCache(cache_dir)
    key = compile_cache.key_of(KEY, ".bin")
    assert cache.find(key, ".bin") is None
    path = cache.get_or_build(KEY, ".bin", write_content)
    assert path.stem == key
    assert CompileCache(cache_dir).find(key, ".bin") == path  # from disk, in a new cache
    assert cache.find(key, ".bin") == path and cache.stats.memory_hits == 1


@pytest.mark.parametrize("key", ["../" + "a" * 61, "A" * 64, "a" * 63, "", "a" * 64 + "/x"])
def test_find_refuses_malformed_keys(cache_dir, key):
    cache = CompileCache(cache_dir)
    assert cache.find(key, ".bin") is None
    cache.discard(key, ".bin")  # nothing to do, no error


def test_find_does_not_load_a_damaged_entry(cache_dir):
    cache = CompileCache(cache_dir)
    path = cache.get_or_build(KEY, ".bin", write_content)
    path.write_bytes(CONTENT[:-1])
    assert CompileCache(cache_dir).find(path.stem, ".bin") is None


def test_discard_removes_an_entry_from_both_levels(cache_dir):
    cache = CompileCache(cache_dir)
    path = cache.get_or_build(KEY, ".bin", write_content)
    cache.discard(path.stem, ".bin")
    assert not path.exists() and not path.with_suffix(".sha256").exists()
    assert cache.find(path.stem, ".bin") is None
    assert cache.get_or_build(KEY, ".bin", write_content) == path
    assert cache.stats.disk_misses == 2


# --- several processes --------------------------------------------------------------


def _slow_build(path: Path, marker_dir: str) -> None:
    """Writes in two steps with a pause, so that racing builders would overlap."""
    Path(marker_dir, f"built-by-{os.getpid()}").touch()
    with open(path, "wb") as file:
        file.write(CONTENT[: len(CONTENT) // 2])
        file.flush()
        time.sleep(0.3)
        file.write(CONTENT[len(CONTENT) // 2:])


def _race(directory: str, marker_dir: str, start, results) -> None:
    cache = CompileCache(Path(directory))
    start.wait()
    path = cache.get_or_build(KEY, ".bin", lambda p: _slow_build(p, marker_dir))
    results.put((str(path), path.read_bytes() == CONTENT, cache.stats.disk_misses))


def test_concurrent_processes_build_once(tmp_path):
    directory, markers = tmp_path / "cache", tmp_path / "markers"
    markers.mkdir()
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_race, args=(str(directory), str(markers), start, results))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    assert len(list(markers.iterdir())) == 1, "exactly one process must build"
    assert len({path for path, _, _ in outcomes}) == 1
    assert all(content_ok for _, content_ok, _ in outcomes)
    assert sorted(builds for _, _, builds in outcomes) == [0, 0, 0, 1]
    assert CompileCache(directory).get_or_build(KEY, ".bin", failing_build).read_bytes() == CONTENT


def _die_mid_build(directory: str) -> None:
    def build(path: Path) -> None:
        with open(path, "wb") as file:
            file.write(CONTENT[: len(CONTENT) // 2])
        os._exit(3)

    CompileCache(Path(directory)).get_or_build(KEY, ".bin", build)


def test_process_killed_mid_build_leaves_nothing_loadable(tmp_path):
    directory = tmp_path / "cache"
    worker = multiprocessing.get_context("spawn").Process(target=_die_mid_build, args=(str(directory),))
    worker.start()
    worker.join(timeout=120)
    assert worker.exitcode == 3

    cache = CompileCache(directory)
    assert not cache.artifact_path(KEY, ".bin").exists()
    path = cache.get_or_build(KEY, ".bin", write_content)  # the dead process's lock is free
    assert path.read_bytes() == CONTENT
    assert cache.stats.disk_misses == 1


# --- unsafe directories ----------------------------------------------------------


def _make_cache_expecting_one_warning(directory: Path, match: str, caches: list) -> CompileCache:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = CompileCache(directory)
        caches.append(cache)
        cache.get_or_build(KEY, ".bin", write_content)
        cache.get_or_build(KEY, ".bin", write_content)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert match in messages[0] and str(directory) in messages[0]
    assert cache.directory != directory
    assert cache.directory.name.startswith("ember-cache-")
    assert stat.S_IMODE(os.stat(cache.directory).st_mode) == 0o700
    assert cache.get_or_build(KEY, ".bin", failing_build).read_bytes() == CONTENT
    return cache


def test_unwritable_directory_falls_back_to_private_temp_dir(tmp_path, monkeypatch, fallback_cleanup):
    directory = tmp_path / "readonly"
    directory.mkdir(mode=0o700)
    directory.chmod(0o500)
    if os.geteuid() == 0:  # root ignores the mode bits: fake what access() would say
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw:
                            False if Path(path) == directory else real_access(path, mode, **kw))
    try:
        _make_cache_expecting_one_warning(directory, "not writable", fallback_cleanup)
        assert list(directory.iterdir()) == []
    finally:
        directory.chmod(0o700)


def test_directory_owned_by_someone_else_is_refused(tmp_path, monkeypatch, fallback_cleanup):
    directory = tmp_path / "theirs"
    directory.mkdir(mode=0o700)
    owner = os.stat(directory).st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    _make_cache_expecting_one_warning(directory, "owned by", fallback_cleanup)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_group_or_world_writable_directory_is_refused(tmp_path, mode, fallback_cleanup):
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(mode)
    _make_cache_expecting_one_warning(directory, "writable by group or others", fallback_cleanup)


def test_directory_that_cannot_be_created_is_refused(tmp_path, fallback_cleanup):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _make_cache_expecting_one_warning(blocker / "cache", "cannot be created", fallback_cleanup)


def test_new_directory_is_private(tmp_path):
    directory = tmp_path / "deep" / "cache"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache = CompileCache(directory)
    assert cache.directory == directory
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700


# --- the process-wide cache ------------------------------------------------------------


def test_default_cache_follows_config(tmp_path):
    saved = config.cache_dir
    try:
        config.update("cache_dir", str(tmp_path / "one"))
        first = default_cache()
        assert first is default_cache()
        assert first.directory == tmp_path / "one"
        config.update("cache_dir", str(tmp_path / "two"))
        second = default_cache()
        assert second is not first and second.directory == tmp_path / "two"
    finally:
        config.update("cache_dir", saved)


def test_default_directory_uses_xdg_then_home(tmp_path, monkeypatch):
    saved = config.cache_dir
    try:
        config.update("cache_dir", None)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert compile_cache.default_directory() == tmp_path / "xdg" / "ember"
        monkeypatch.delenv("XDG_CACHE_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert compile_cache.default_directory() == tmp_path / "home" / ".cache" / "ember"
    finally:
        config.update("cache_dir", saved)
