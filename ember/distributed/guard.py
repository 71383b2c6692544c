"""Collectives that never hang: every cross-process collective first meets its peers.

Before the data moves, each process sends its peers a small signature of the collective
it is at (its sequence number, operation, shape and dtype) and waits for theirs, while
it watches for notices from processes that raised or exited. A small collective's data
(up to ``INLINE_BYTES``) rides along with the signature, so it takes one meeting, not
two; a peer reads it only once the signatures agree. So processes that run
different programs get an error naming the mismatch, a process that is gone is named
within ``config.distributed_timeout`` seconds, and MPI's process-failure reports (Open
MPI's ULFM, which ``ember launch`` turns on) name a process killed mid-step. All of it
is MPI point-to-point messages on a communicator of its own, apart from the data. The
meeting itself runs in C (``meeting.c``) once that is built, else through mpi4py; in C
it also sums a small reduction's data, in the same order as NumPy does here.
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
import time
from typing import Any, Callable, Collection, Sequence

import numpy as np

from ember.config import config
from ember.distributed.errors import DistributedError, PeerFailedError
from ember.distributed.in_order import reduce_rows

__all__ = ["Guard"]

SIGNATURE_BYTES = 512
INLINE_BYTES = 1 << 16  # data sent with the signature; every receive has room for it
TAG_SIGNATURE = 7001
TAG_NOTICE = 7002
_POLL_SECONDS = 0.0002
_BUSY_SECONDS = 0.0005
_BUSY_NANOSECONDS = 500_000  # (the same, for the C meeting)
_SPIN_SECONDS = 0.005
_POLLS_PER_NOTICE_READ = 16
PENDING = -1  # the C meeting's status while peers have not come
STACK = 0  # the C meeting stacks every process's data (else sums them: meeting.c)
_NATIVE_SUMS = {np.dtype(t): code for code, t in enumerate(
    (np.float32, np.float64, np.uint8, np.uint16, np.uint32, np.uint64), start=1)}
_NATIVE_SUMS.update({np.dtype(t): _NATIVE_SUMS[np.dtype(u)] for t, u in (
    (np.int8, np.uint8), (np.int16, np.uint16), (np.int32, np.uint32), (np.int64, np.uint64))})


class Guard:
    """The meeting point of one job's processes (``world``: an MPI intracommunicator)."""

    def __init__(self, world: Any) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.control = world.Dup()  # signatures and notices, never data
        self.control.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank = self.control.Get_rank()
        self.size = self.control.Get_size()
        self.seq = 0
        self.notices: dict[int, dict] = {}
        self._sends: list[tuple[Any, bytes]] = []  # in flight, with their buffers
        self.announced = False
        self.gone: set[int] = set()
        # One receive buffer per peer, reused: a signature's data is read (copied) by
        # the caller before the next meeting.
        self._inbox: dict[int, bytearray] = {}
        self._native: tuple | None = None  # the C meeting, once built (see check)
        self._rank_arrays: dict[tuple[int, ...], np.ndarray] = {}
        self._status = np.zeros(1, np.int64)  # the C meeting's status, written there

    # --- meeting at a collective ----------------------------------------------------
    def check(self, what: str, ranks: Sequence[int], data: np.ndarray | None = None, *,
              total: bool = False) -> np.ndarray | None:
        """Meet the processes ``ranks`` (this one among them) at the collective ``what``;
        raise a DistributedError if one of them is elsewhere, failed, exited or too late.
        ``data`` (C-contiguous, at most ``INLINE_BYTES``) goes to every peer with the
        signature. Returns every process's, stacked in the order of ``ranks`` (a fresh
        array, None without data); where ``total``, the sum of the rows (axis 0) of
        every process's in that order instead."""
        self.seq += 1
        if len(ranks) == 1:
            if data is None:
                return None
            return reduce_rows(data, "sum") if total else data[None].copy()
        if data is not None and data.nbytes > INLINE_BYTES:
            raise ValueError(f"{data.nbytes} bytes of data do not fit with a signature "
                             f"(at most {INLINE_BYTES})")
        native = self._native if self._native is not None else self._native_meeting()
        if native is not None:
            return self._meet_natively(native, what, tuple(ranks), data, total)
        payload = b"" if data is None else data.tobytes()
        rows = self._meet(what, ranks, _record(self.seq, what, len(payload)), payload)
        if data is None:
            return None
        stacked = np.frombuffer(rows, data.dtype).reshape(len(ranks), *data.shape)
        return _total(stacked) if total else stacked.copy()

    def _meet(self, what: str, ranks: Sequence[int], record: bytes,
              payload: bytes) -> memoryview:
        """The meeting through mpi4py, message by message; every process's payload, in
        the order of ``ranks``."""
        others = [p for p in ranks if p != self.rank]
        for peer in others:
            self._send(record + payload, peer, TAG_SIGNATURE)
        buffers = {p: self._buffer(p) for p in others}
        pending = {p: self.control.Irecv(buffers[p], source=p, tag=TAG_SIGNATURE)
                   for p in others}

        def arrivals() -> Collection[int]:
            self._arrivals(pending, buffers, record, what, len(payload))
            return pending

        if arrivals():  # (peers usually come within microseconds: no notices read before)
            self._wait(what, arrivals)
        self._prune_sends()
        end = SIGNATURE_BYTES + len(payload)  # (the signatures agree on the size)
        return memoryview(b"".join(
            payload if p == self.rank else memoryview(buffers[p])[SIGNATURE_BYTES:end]
            for p in ranks))

    def _meet_natively(self, native: tuple, what: str, ranks: tuple[int, ...],
                       data: np.ndarray | None, total: bool) -> np.ndarray | None:
        """The same meeting in C (``meeting.c``): one call where peers are on time. It
        sums float32, float64 and integer data itself; other data it stacks, summed
        here."""
        library, state = native
        if data is None:
            size, out, fold, rows = 0, None, STACK, 1
        else:
            size = data.nbytes
            fold = _NATIVE_SUMS.get(data.dtype, STACK) if total else STACK
            out = np.empty(data.shape[1:] if fold else (len(ranks), *data.shape), data.dtype)
            rows = data.shape[0] if total else 1
        status = library.start([state, self._rank_array(ranks), len(ranks), self.seq,
                                _record_tail_array(what, size), data, size, out, fold, rows,
                                _BUSY_NANOSECONDS, self._status])
        if status != 0 and self._native_outcome(native, status, what, ranks, size):
            self._wait(what, lambda: self._native_outcome(
                native, library.poll(state, 0.0), what, ranks, size))
        return _total(out) if total and fold == STACK else out

    def _native_outcome(self, native: tuple, status: int, what: str,
                        ranks: tuple[int, ...], size: int) -> Collection[int]:
        """The peers the C meeting still waits for, from its status; raises for a
        mismatch or an MPI error."""
        library, state = native
        if status == PENDING:
            waiting = np.empty(len(ranks), np.int32)
            return waiting[:library.pending(state, waiting.ctypes.data)].tolist()
        if status > 0:
            peer = status - 1
            signature = ctypes.string_at(library.slot(state, peer), SIGNATURE_BYTES)
            self._compare(peer, bytearray(signature), what, size)
            raise DistributedError(f"rank {peer}'s signature at collective #{self.seq} "
                                   f"({what}) differs from rank {self.rank}'s")
        if status < PENDING:
            raise self._failure(what, self.MPI.Exception(-2 - status))  # (its code)
        return ()

    def _native_meeting(self) -> tuple | None:
        """(the C meeting's library, this communicator's state) once it is built."""
        if self._native is None:
            from ember.distributed.native_meeting import meeting_state, native_meetings

            library = native_meetings()
            if library is None:
                return None
            self._native = (library, meeting_state(library, self.control, TAG_SIGNATURE,
                                                   SIGNATURE_BYTES, INLINE_BYTES))
        return self._native

    def _rank_array(self, ranks: tuple[int, ...]) -> np.ndarray:
        """``ranks`` as C int32s, made once per group."""
        array = self._rank_arrays.get(ranks)
        if array is None:
            array = self._rank_arrays[ranks] = np.array(ranks, np.int32)
        return array

    def _arrivals(self, pending: dict, buffers: dict, record: bytes, what: str,
                  size: int) -> None:
        """Removes from ``pending`` the peers whose signatures have come; raises where
        one differs from this process's ``record``."""
        for peer, request in list(pending.items()):
            if self._test(request, what):
                del pending[peer]
                if buffers[peer][:SIGNATURE_BYTES] != record:  # (one comparison)
                    self._compare(peer, buffers[peer], what, size)

    def _wait(self, what: str, arrivals: Callable[[], Collection[int]]) -> None:
        """Until ``arrivals()`` (tests again, returns the peers not come yet) is empty:
        notices from processes that raised or exited, and the timeout, end the wait
        with an error naming them."""
        pending = arrivals()
        if not pending:
            return
        self._read_notices_then(arrivals, what, pending)
        start = time.monotonic()
        deadline = start + float(config.distributed_timeout)
        polls = 0
        while pending:
            polls += 1
            if polls % _POLLS_PER_NOTICE_READ == 0:  # notices matter only to a long wait
                self._read_notices_then(arrivals, what, pending)
            if time.monotonic() > deadline:
                late = ", ".join(map(str, sorted(pending)))
                self._read_notices_then(arrivals, what, pending)  # one failed or left
                raise DistributedError(
                    f"rank {late} did not reach collective #{self.seq} ({what}) within "
                    f"{float(config.distributed_timeout):g} s (ember.config "
                    f"distributed_timeout); this is rank "
                    f"{self.rank}. A process may be stuck, or run a different program")
            waited = time.monotonic() - start
            if waited >= _SPIN_SECONDS:
                time.sleep(_POLL_SECONDS)
            elif waited >= _BUSY_SECONDS:
                os.sched_yield()
            pending = arrivals()

    def _read_notices_then(self, arrivals: Callable[[], Collection[int]], what: str,
                           pending: Collection[int]) -> None:
        """``_read_notices``, but where a peer failed, first ``arrivals()`` once more: a
        peer that found a mismatch sent its signature before its notice, and probing
        for the notice may be what moved the signature in; the mismatch is the error to
        name then, not the peer's report of it."""
        try:
            self._read_notices(what, pending)
        except PeerFailedError:
            try:
                arrivals()
            except DistributedError as mismatch:
                raise mismatch from None
            raise

    def run(self, what: str, operation: Callable[[], Any]) -> Any:
        """Run an MPI data operation; a peer that dies during it is named."""
        try:
            return operation()
        except self.MPI.Exception as error:
            raise self._failure(what, error) from None

    # --- notices: a process that raised or exits tells the others -------------------
    def announce(self, kind: str, message: str, origin: int) -> None:
        """Tell every other process that this one stops ('failed' or 'left')."""
        if self.announced:
            return
        self.announced = True
        notice = json.dumps({"kind": kind, "message": message[:2000], "origin": origin,
                             "seq": self.seq}).encode()
        for peer in range(self.size):
            if peer != self.rank:
                try:
                    self._send(notice, peer, TAG_NOTICE)
                except self.MPI.Exception:
                    pass  # a process that is gone needs no notice
        deadline = time.monotonic() + 2.0
        while self._sends and time.monotonic() < deadline:
            self._prune_sends()
            time.sleep(0.001)

    def _read_notices(self, what: str, pending: Any) -> None:
        self._collect_notices()
        for source, notice in sorted(self.notices.items()):
            if notice["kind"] == "failed":
                origin = notice["origin"]
                raise PeerFailedError(
                    f"rank {origin} failed ({notice['message']}); rank {self.rank} stops "
                    f"at collective #{self.seq} ({what})", origin)
        for source, notice in sorted(self.notices.items()):
            if source in pending and notice["seq"] < self.seq:
                raise PeerFailedError(
                    f"rank {source} exited after {notice['seq']} collectives, before "
                    f"collective #{self.seq} ({what}) that rank {self.rank} waits for it "
                    "at", source)

    def _collect_notices(self) -> None:
        """Receive the notices that have arrived. Probed source by source: after a
        process failure MPI refuses receives from any source (ULFM)."""
        MPI = self.MPI
        status = MPI.Status()
        for source in range(self.size):
            if source == self.rank:
                continue
            try:
                while self.control.Iprobe(source=source, tag=TAG_NOTICE, status=status):
                    buffer = bytearray(status.Get_count(MPI.BYTE))
                    self.control.Recv([buffer, MPI.BYTE], source=source, tag=TAG_NOTICE)
                    self.notices[source] = json.loads(buffer.decode())
            except MPI.Exception:
                self.gone.add(source)  # a process that is gone; _failed_ranks names it

    def wait_for_peers(self, seconds: float) -> None:
        """Until every other process has sent a notice or is gone (at most ``seconds``):
        a failing process lingers so that MPI does not end the others before they have
        reported the failure."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._collect_notices()
            self.gone.update(self._failed_ranks())
            if len(set(self.notices) | self.gone | {self.rank}) >= self.size:
                return
            time.sleep(0.01)

    # --- helpers --------------------------------------------------------------------
    def _buffer(self, peer: int) -> bytearray:
        buffer = self._inbox.get(peer)
        if buffer is None:
            buffer = self._inbox[peer] = bytearray(SIGNATURE_BYTES + INLINE_BYTES)
        return buffer

    def _send(self, payload: bytes, peer: int, tag: int) -> None:
        request = self.control.Isend([payload, self.MPI.BYTE], dest=peer, tag=tag)
        self._sends.append((request, payload))

    def _prune_sends(self) -> None:
        kept = []
        for request, payload in self._sends:
            try:
                done = request.Test()
            except self.MPI.Exception:
                done = True  # to a process that is gone: nothing left to deliver
            if not done:
                kept.append((request, payload))
        self._sends = kept

    def _test(self, request: Any, what: str) -> bool:
        try:
            return request.Test()
        except self.MPI.Exception as error:
            raise self._failure(what, error) from None

    def _compare(self, peer: int, buffer: bytearray, what: str, size: int) -> None:
        """Raise the error for a peer whose signature differs from this process's."""
        seq, nbytes, at = bytes(buffer[:SIGNATURE_BYTES]).rstrip(b"\0").split(b"\0", 2)
        theirs = {"seq": int(seq), "bytes": int(nbytes), "what": at.decode(errors="replace")}
        if (theirs["seq"] != self.seq or theirs["what"] != _short(what)
                or theirs["bytes"] != size):
            raise DistributedError(
                f"processes disagree at a collective: rank {self.rank} is at collective "
                f"#{self.seq}: {_short(what)}, but rank {peer} is at collective "
                f"#{theirs['seq']}: {theirs['what']}. Every process must run the same "
                "program on arrays of the same shapes and dtypes")

    def _failure(self, what: str, error: Exception) -> DistributedError:
        """The error for an MPI failure report: a notice that explains it, else the
        processes MPI found gone."""
        try:
            self._read_notices(what, ())
        except DistributedError as noticed:
            return noticed
        failed = self._failed_ranks()
        named = f"rank {', '.join(map(str, failed))}" if failed else "a process"
        return PeerFailedError(
            f"{named} died (MPI reports: {error}) during collective #{self.seq} ({what}); "
            f"rank {self.rank} stops", failed[0] if failed else -1)

    def _failed_ranks(self) -> list[int]:
        try:
            group = self.control.Get_failed()
            ranks = self.MPI.Group.Translate_ranks(group, list(range(group.Get_size())),
                                                   self.control.Get_group())
            return sorted(int(r) for r in ranks)
        except (self.MPI.Exception, NotImplementedError, AttributeError):
            return []


def _short(what: str) -> str:
    return what if len(what) <= 400 else what[:400] + "..."


def _record(seq: int, what: str, size: int) -> bytes:
    """The signature: sequence number, data size and the collective's description,
    NUL-separated, padded to ``SIGNATURE_BYTES`` (equal records: the same collective)."""
    record = str(seq).encode() + _record_tail(what, size)
    return record.ljust(SIGNATURE_BYTES, b"\0")[:SIGNATURE_BYTES]


@functools.lru_cache(maxsize=1024)  # a program's collectives repeat every step
def _record_tail(what: str, size: int) -> bytes:
    return f"\0{size}\0{_short(what)}".encode()


@functools.lru_cache(maxsize=1024)
def _record_tail_array(what: str, size: int) -> np.ndarray:
    """The record's tail padded to ``SIGNATURE_BYTES``, for the C meeting (which puts
    the sequence number before it, as ``_record`` does)."""
    tail = _record_tail(what, size).ljust(SIGNATURE_BYTES, b"\0")[:SIGNATURE_BYTES]
    return np.frombuffer(tail, np.uint8)


def _total(stacked: np.ndarray) -> np.ndarray:
    """The sum of every process's rows (``stacked``: [process, rows, ...]) in order."""
    return reduce_rows(stacked.reshape(-1, *stacked.shape[2:]), "sum")


def install_exit_hooks(guard: Guard) -> None:
    """An uncaught exception tells the other processes before this one exits; a normal
    exit tells them how many collectives this process took part in.

    mpirun ends every process of a job soon after one exits with a non-zero status
    without finalizing MPI, as a failing one does here. So a failing process writes its
    error before it tells the others (a peer that learns of it may exit at once), then
    lingers until each of them has told it or is gone."""
    import atexit

    previous = sys.excepthook

    def on_error(kind: type, value: BaseException, tb: Any) -> None:
        from ember.distributed.exit_status import record_exit

        previous(kind, value, tb)
        record_exit(1)
        sys.stdout.flush()
        sys.stderr.flush()
        origin = value.origin if isinstance(value, PeerFailedError) else guard.rank
        guard.announce("failed", f"{kind.__name__}: {value}", origin)
        guard.wait_for_peers(float(config.distributed_timeout))
        os._exit(1)  # MPI_Finalize would wait for processes that are gone

    sys.excepthook = on_error
    atexit.register(lambda: guard.announce("left", "", guard.rank))
