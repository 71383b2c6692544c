"""The persistent compile cache: content-addressed native artifacts, in memory and on disk.

An entry is found by a key, the sha256 of everything that changes the artifact (source,
flags, compiler version, target ISA; the caller decides). Two levels:

- memory: key -> path of an artifact already verified in this process;
- disk: ``<dir>/<key[:2]>/<key><suffix>`` plus a sidecar ``<key>.sha256`` holding the
  sha256 of the artifact's bytes.

An artifact on disk counts only when its sidecar exists and matches its content, so a
truncated, corrupted, half-written or planted file is rebuilt, never loaded. Builds run
under an exclusive ``flock`` on ``<key>.lock``: when several processes miss at once (the
ranks of a job on one host, compiling the same program), one builds and the others wait
and then find its result, for at most ``config.cache_wait_timeout`` seconds; a process
that waited longer builds a private copy, outside the cache, rather than wait on.
Artifact and sidecar are written to temporary files and moved into place with
``os.replace`` (artifact first, then sidecar), so a reader never sees a partial file and
a killed process leaves no valid-looking entry.
Nothing is fsynced (each fsync cost milliseconds on a cold compile): after a crash of
the machine, an artifact whose data did not reach the disk no longer matches its
sidecar, or the sidecar is missing or empty, so the entry is rebuilt.

Nothing read from the cache is unpickled or evaluated: the only things read back are the
artifact's bytes (hashed) and the hex digest in the sidecar; a valid artifact is then
loaded as a library or parsed as data (JSON) by its owner. ``find`` looks an entry up by
its key alone, without building: an entry can name another by key (the CPU backend's
program descriptions name their library).
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ember.config import config
from ember.errors import CompileError

_KEY = re.compile(r"[0-9a-f]{64}")
_LOCK_SUFFIX = ".lock"
_SIDECAR_SUFFIX = ".sha256"


@dataclass
class CacheStats:
    """Lookups per level. A disk miss is a build."""

    memory_hits: int = 0
    memory_misses: int = 0
    disk_hits: int = 0
    disk_misses: int = 0


def hash_key(parts: Sequence[str | bytes]) -> str:
    """sha256 over the parts, each length-prefixed and typed so that parts can't run together."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, str):
            tag, data = b"s", part.encode("utf-8")
        elif isinstance(part, bytes):
            tag, data = b"b", part
        else:
            raise TypeError(f"cache key parts must be str or bytes, got {type(part).__name__}")
        digest.update(tag + len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def safe_file_name(name: str) -> str:
    """``name`` (a kernel's, a program's) made safe as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "kernel"


def key_of(key_parts: Sequence[str | bytes], suffix: str) -> str:
    """The key of an entry: also the stem of its artifact's file name."""
    return hash_key([*key_parts, suffix])


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _unsafe_reason(directory: Path) -> str | None:
    """Why ``directory`` must not hold native code we will load, or None when it is fine.

    Another user who can write there could plant a shared object that we would then
    dlopen, so the directory must be ours and writable by nobody else.
    """
    info = os.stat(directory)
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if info.st_uid != os.getuid():
        return f"it is owned by uid {info.st_uid}, not by the current user (uid {os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    if not os.access(directory, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def _prepare_directory(requested: Path) -> Path:
    """Create ``requested`` (mode 0700) and check it; fall back to a private temp dir."""
    try:
        requested.mkdir(mode=0o700, parents=True, exist_ok=True)
        reason = _unsafe_reason(requested)
    except OSError as error:
        reason = f"it cannot be created or read ({error.strerror or error})"
    if reason is None:
        return requested
    fallback = Path(tempfile.mkdtemp(prefix="ember-cache-"))
    atexit.register(shutil.rmtree, fallback, ignore_errors=True)
    warnings.warn(
        f"ember: not using compile cache directory {requested} because {reason}; "
        f"using the private temporary directory {fallback} for this process instead. "
        "Fix the directory's owner and permissions (chmod 700) or set EMBER_CACHE_DIR.",
        RuntimeWarning,
        stacklevel=3,
    )
    return fallback


def default_directory() -> Path:
    """``config.cache_dir``, else ``$XDG_CACHE_HOME/ember``, else ``~/.cache/ember``."""
    if config.cache_dir:
        return Path(config.cache_dir).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "ember"


class CompileCache:
    """A two-level (memory, disk) cache of built artifacts, keyed by content hash."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.requested_directory = Path(directory) if directory is not None else default_directory()
        self.directory = _prepare_directory(self.requested_directory)
        self.stats = CacheStats()
        self._memory: dict[str, Path] = {}
        self._mutex = threading.Lock()

    def get_or_build(
        self,
        key_parts: Sequence[str | bytes],
        suffix: str,
        build: Callable[[Path], None],
    ) -> Path:
        """Path of the artifact for ``key_parts``, calling ``build(tmp_path)`` on a miss.

        ``build`` must write the complete artifact to ``tmp_path`` (a fresh, unique file
        in the cache directory) or raise; its exceptions propagate and leave no entry.
        """
        key = key_of(key_parts, suffix)
        found = self.find(key, suffix)
        if found is not None:
            return found
        entry = self._entry(key, suffix)
        entry.folder.mkdir(mode=0o700, exist_ok=True)
        start = time.monotonic()
        with _exclusive_lock(entry.lock, float(config.cache_wait_timeout)) as held:
            if held and entry.is_valid():  # another process built it while we waited
                _log(f"{key[:16]}{suffix} built by another process (waited "
                     f"{time.monotonic() - start:.3f} s)")
                return self._remember(key, entry.artifact, disk_hit=True)
            if held:
                entry.build(build)
                return self._remember(key, entry.artifact, disk_hit=False)
        _log(f"{key[:16]}{suffix}: another process held its build for "
             f"{config.cache_wait_timeout:g} s (cache_wait_timeout); building a private copy")
        return self._remember(key, self._private_build(key, suffix, build), disk_hit=False)

    def _private_build(self, key: str, suffix: str, build: Callable[[Path], None]) -> Path:
        """``build`` into a folder of this process's own, removed when it exits."""
        folder = Path(tempfile.mkdtemp(prefix="ember-private-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        entry = _Entry(folder, key, suffix)
        entry.build(build)
        return entry.artifact

    def find(self, key: str, suffix: str) -> Path | None:
        """The valid artifact stored under ``key`` (a ``key_of`` result), or None; never
        builds. A malformed key (say, read from a damaged file) is simply not found."""
        if not _KEY.fullmatch(key):
            return None
        cached = self._memory_lookup(key)
        if cached is not None:
            return cached
        entry = self._entry(key, suffix)
        if entry.is_valid():
            return self._remember(key, entry.artifact, disk_hit=True)
        return None

    def discard(self, key: str, suffix: str) -> None:
        """Remove the entry under ``key`` (one found unusable), in memory and on disk."""
        if not _KEY.fullmatch(key):
            return
        with self._mutex:
            self._memory.pop(key, None)
        entry = self._entry(key, suffix)
        if entry.folder.is_dir():
            with _exclusive_lock(entry.lock):
                entry.sidecar.unlink(missing_ok=True)  # first: the entry is invalid from here
                entry.artifact.unlink(missing_ok=True)

    def answer(self, key_parts: Sequence[str | bytes], suffix: str, compute: Callable[[], Any],
               valid: Callable[[Any], bool]) -> tuple[Any, bool]:
        """A probe's answer kept as a JSON entry: (the stored answer, True) if one is
        stored and ``valid``, else (``compute()``, False), stored for later processes. An
        entry that does not check out is discarded; a store that fails is skipped (the
        next process probes again)."""
        key = key_of(key_parts, suffix)
        path = self.find(key, suffix)
        if path is not None:
            try:
                stored = json.loads(path.read_text(encoding="utf-8"))
                if valid(stored):
                    return stored, True
            except (OSError, ValueError, TypeError):
                pass
            self.discard(key, suffix)
        result = compute()
        text = json.dumps(result)
        with contextlib.suppress(OSError):
            self.get_or_build(key_parts, suffix, lambda tmp: tmp.write_text(text))
        return result, False

    def artifact_path(self, key_parts: Sequence[str | bytes], suffix: str) -> Path:
        """Where the artifact for ``key_parts`` lives on disk (whether or not it exists)."""
        return self._entry(key_of(key_parts, suffix), suffix).artifact

    def _entry(self, key: str, suffix: str) -> _Entry:
        return _Entry(self.directory / key[:2], key, suffix)

    def keep_failed_source(self, source: str, name: str, suffix: str = ".c") -> Path:
        """Keep a copy of source a compiler rejected (in the cache's ``failed`` folder, else
        a new temporary one), for a bug report; returns its path."""
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        try:
            folder = self.directory / "failed"
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            folder = Path(tempfile.mkdtemp(prefix="ember-failed-"))
        path = folder / f"{safe_file_name(name)}-{digest}{suffix}"
        path.write_text(source)
        return path

    def rejected(self, what: str, source: str, name: str, suffix: str, how: str,
                 output: str) -> CompileError:
        """The error for generated ``source`` that a compiler rejected (``what``: who
        rejected what; ``how``: the command or options), with the source kept
        (``keep_failed_source``) for the bug report it asks for."""
        saved = self.keep_failed_source(source, name, suffix)
        return CompileError(f"{what}.\nThis is a bug in Ember: please report it with the "
                            f"saved source.\n  source: {saved}\n  {how}\n"
                            f"compiler output:\n{output}")

    def clear(self) -> None:
        """Forget every entry, in memory and on disk, and reset the statistics."""
        with self._mutex:
            self._memory.clear()
            self.stats = CacheStats()
        for child in self.directory.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def forget_memory(self) -> None:
        """Forget the entries verified in this process (the disk keeps them): the next
        lookup reads and checks each one on disk again."""
        with self._mutex:
            self._memory.clear()

    def _memory_lookup(self, key: str) -> Path | None:
        with self._mutex:
            path = self._memory.get(key)
            if path is not None and path.exists():
                self.stats.memory_hits += 1
                return path
            self._memory.pop(key, None)
            self.stats.memory_misses += 1
            return None

    def _remember(self, key: str, path: Path, *, disk_hit: bool) -> Path:
        with self._mutex:
            self._memory[key] = path
            if disk_hit:
                self.stats.disk_hits += 1
            else:
                self.stats.disk_misses += 1
        return path


@dataclass(frozen=True)
class _Entry:
    """The files of one disk entry: artifact, sidecar (content hash) and lock."""

    folder: Path
    key: str
    suffix: str

    @property
    def artifact(self) -> Path:
        return self.folder / (self.key + self.suffix)

    @property
    def sidecar(self) -> Path:
        return self.folder / (self.key + _SIDECAR_SUFFIX)

    @property
    def lock(self) -> Path:
        return self.folder / (self.key + _LOCK_SUFFIX)

    def is_valid(self) -> bool:
        """True when the artifact exists and the sidecar holds its content hash."""
        try:
            expected = self.sidecar.read_text(encoding="utf-8").strip()
            return self.artifact.is_file() and _file_sha256(self.artifact) == expected
        except (OSError, UnicodeDecodeError):
            return False

    def build(self, build: Callable[[Path], None]) -> None:
        """Run ``build`` into a temp file, then move artifact and sidecar into place."""
        tmp_artifact = self._temp_file()
        tmp_sidecar = self._temp_file()
        try:
            build(tmp_artifact)
            if not tmp_artifact.is_file():
                raise RuntimeError(f"compile cache: the build did not write {tmp_artifact}")
            tmp_sidecar.write_text(_file_sha256(tmp_artifact) + "\n", encoding="utf-8")
            os.replace(tmp_artifact, self.artifact)
            os.replace(tmp_sidecar, self.sidecar)
        finally:
            tmp_artifact.unlink(missing_ok=True)
            tmp_sidecar.unlink(missing_ok=True)

    def _temp_file(self) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{self.key}.", suffix=".tmp", dir=self.folder)
        os.close(fd)
        return Path(name)


def _log(message: str) -> None:
    if config.log_enabled("compile"):
        print(f"ember: cache {message}", file=sys.stderr)


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path, timeout: float | None = None) -> Iterator[bool]:
    """Hold ``lock_path`` exclusively; yields False, holding nothing, when another
    process held it for ``timeout`` seconds (None: wait as long as it takes)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield _acquire(fd, timeout)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _acquire(fd: int, timeout: float | None) -> bool:
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)  # a build takes from milliseconds to minutes


_default_cache: CompileCache | None = None
_default_lock = threading.Lock()


def default_cache() -> CompileCache:
    """The process-wide cache; re-created when the configured directory changes."""
    global _default_cache
    wanted = default_directory()
    with _default_lock:
        if _default_cache is None or _default_cache.requested_directory != wanted:
            _default_cache = CompileCache(wanted)
        return _default_cache


def forget_memory() -> None:
    """``CompileCache.forget_memory`` of the process-wide cache, if one was made."""
    with _default_lock:
        cache = _default_cache
    if cache is not None:
        cache.forget_memory()
